# cmake -DSPV=in.spv -DOUT=out.cpp -DSYMBOL=name -P embed_spirv.cmake
file(READ "${SPV}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}" "#include <cstddef>\n// Generated from ${SPV}\nalignas(4) extern const unsigned char ${SYMBOL}[] = {\n${body}\n};\nextern const std::size_t ${SYMBOL}_size = ${bytes};\n")
