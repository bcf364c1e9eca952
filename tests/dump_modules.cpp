// Writes every embedded SPIR-V module to a folder, for spirv-val (see CMakeLists).
#include <cstdio>
#include <fstream>
#include <string>

#include "shader_registry.hpp"

int main(int argc, char** argv) {
  if (argc != 2) { std::fprintf(stderr, "usage: dump_modules DIR\n"); return 2; }
  int n = 0;
  for (const auto& m : vkattn::detail::embedded_modules()) {
    std::ofstream out(std::string(argv[1]) + "/" + m.kernel + "__" + m.path + ".spv", std::ios::binary);
    out.write(reinterpret_cast<const char*>(m.code), static_cast<std::streamsize>(m.size));
    if (!out) return 1;
    ++n;
  }
  std::printf("%d modules\n", n);
  return n > 0 ? 0 : 1;
}
