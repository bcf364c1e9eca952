// Tests for the vkattn command-line flag parser (tools/cli/flags.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/flags.hpp"
#include "commands.hpp"
#include "vk_test.hpp"

namespace {

using vkattn::cli::Flags;
using vkattn::cli::UsageError;

struct KvFlags {
  Flags f{"vkattn run write-kv-cache", "Scatter new K/V tokens into the paged cache and verify"};
  std::int64_t& tokens = f.add_int("num-tokens", 37, "tokens to write", 0, 1 << 20);
  std::int64_t& head_size = f.add_int("head-size", 128, "head dimension");
  std::string& dtype = f.add_choice("cache-dtype", "f16", {"f16", "bf16", "fp8_e4m3", "fp8_e5m2"}, "cache dtype");
  double& scale = f.add_double("k-scale", 1.0, "K scale for fp8 caches");
  std::string& json = f.add_string("json", "", "write figures to FILE");
  bool& verbose = f.add_bool("verbose", false, "print every mismatch");
  std::vector<std::int64_t>& batch = f.add_int_list("batch", {1, 16}, "comma-separated batch sizes", 1);
  std::vector<std::string>& dtypes =
      f.add_string_list("dtypes", {"f16"}, "dtypes to sweep", {"f16", "bf16", "fp32"});
};

// Runs parse and returns the UsageError message ("" when nothing was thrown).
std::string error_of(Flags& f, const std::vector<std::string>& args) {
  try {
    f.parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CliFlags, DefaultsWithoutArguments) {
  KvFlags k;
  k.f.parse({});
  EXPECT_EQ(k.tokens, 37);
  EXPECT_EQ(k.head_size, 128);
  EXPECT_EQ(k.dtype, "f16");
  EXPECT_DOUBLE_EQ(k.scale, 1.0);
  EXPECT_EQ(k.json, "");
  EXPECT_FALSE(k.verbose);
  EXPECT_EQ(k.batch, (std::vector<std::int64_t>{1, 16}));
  EXPECT_EQ(k.dtypes, (std::vector<std::string>{"f16"}));
  EXPECT_FALSE(k.f.help_requested());
  EXPECT_FALSE(k.f.was_set("num-tokens"));
  EXPECT_FALSE(k.f.was_set("verbose"));
}

TEST(CliFlags, SpaceAndEqualsForms) {
  KvFlags k;
  k.f.parse({"--num-tokens", "5", "--cache-dtype=fp8_e4m3", "--k-scale", "0.25", "--json=out.json",
             "--head-size=64"});
  EXPECT_EQ(k.tokens, 5);
  EXPECT_EQ(k.dtype, "fp8_e4m3");
  EXPECT_DOUBLE_EQ(k.scale, 0.25);
  EXPECT_EQ(k.json, "out.json");
  EXPECT_EQ(k.head_size, 64);
  EXPECT_TRUE(k.f.was_set("num-tokens"));
  EXPECT_TRUE(k.f.was_set("cache-dtype"));
  EXPECT_FALSE(k.f.was_set("batch"));
}

TEST(CliFlags, ValueMayContainEqualsAndLeadingDash) {
  KvFlags k;
  k.f.parse({"--json=a=b.json", "--k-scale", "-1.5e-2", "--head-size", "+8"});
  EXPECT_EQ(k.json, "a=b.json");
  EXPECT_DOUBLE_EQ(k.scale, -0.015);
  EXPECT_EQ(k.head_size, 8);
}

TEST(CliFlags, LastOccurrenceWins) {
  KvFlags k;
  k.f.parse({"--num-tokens", "5", "--num-tokens=9", "--batch", "2", "--batch", "3,4"});
  EXPECT_EQ(k.tokens, 9);
  EXPECT_EQ(k.batch, (std::vector<std::int64_t>{3, 4}));
}

TEST(CliFlags, BoolForms) {
  {
    KvFlags k;
    k.f.parse({"--verbose"});
    EXPECT_TRUE(k.verbose);
    EXPECT_TRUE(k.f.was_set("verbose"));
  }
  {
    KvFlags k;
    k.verbose = true;  // references are live storage
    k.f.parse({"--no-verbose"});
    EXPECT_FALSE(k.verbose);
    EXPECT_TRUE(k.f.was_set("verbose"));
  }
  for (const char* t : {"true", "1", "yes", "on", "TRUE"}) {
    KvFlags k;
    k.f.parse({std::string("--verbose=") + t});
    EXPECT_TRUE(k.verbose) << t;
  }
  for (const char* t : {"false", "0", "no", "off", "False"}) {
    KvFlags k;
    k.verbose = true;
    k.f.parse({std::string("--verbose=") + t});
    EXPECT_FALSE(k.verbose) << t;
  }
  {
    // A bool never consumes the next token.
    KvFlags k;
    EXPECT_EQ(error_of(k.f, {"--verbose", "false"}), "unexpected argument 'false'");
  }
  {
    KvFlags k;
    EXPECT_EQ(error_of(k.f, {"--verbose=maybe"}),
              "--verbose: 'maybe' is not a boolean (expected true or false)");
  }
  {
    KvFlags k;
    EXPECT_EQ(error_of(k.f, {"--no-verbose=true"}), "--no-verbose does not take a value");
  }
}

TEST(CliFlags, Lists) {
  KvFlags k;
  k.f.parse({"--batch", "1,16,64", "--dtypes=bf16,f16"});
  EXPECT_EQ(k.batch, (std::vector<std::int64_t>{1, 16, 64}));
  EXPECT_EQ(k.dtypes, (std::vector<std::string>{"bf16", "f16"}));

  KvFlags k2;
  k2.f.parse({"--batch= 8 , 9"});
  EXPECT_EQ(k2.batch, (std::vector<std::int64_t>{8, 9}));

  KvFlags e1;
  EXPECT_EQ(error_of(e1.f, {"--batch", "1,x,3"}), "--batch: 'x' in '1,x,3' is not an integer");
  KvFlags e2;
  EXPECT_EQ(error_of(e2.f, {"--batch", "1,,3"}), "--batch: '1,,3' has an empty list element");
  KvFlags e3;
  EXPECT_EQ(error_of(e3.f, {"--batch", "4,0"}), "--batch: 0 is below the minimum 1");
  KvFlags e4;
  EXPECT_EQ(error_of(e4.f, {"--batch="}), "--batch: expected a comma-separated list of integers, got ''");
  KvFlags e5;
  EXPECT_EQ(error_of(e5.f, {"--dtypes", "f16,f64"}), "--dtypes: 'f64' in 'f16,f64' is not one of f16, bf16, fp32");
}

TEST(CliFlags, NotAnInteger) {
  KvFlags k;
  EXPECT_EQ(error_of(k.f, {"--num-tokens", "abc"}), "--num-tokens: 'abc' is not an integer");
  KvFlags k2;
  EXPECT_EQ(error_of(k2.f, {"--num-tokens=12x"}), "--num-tokens: '12x' is not an integer");
  KvFlags k3;
  EXPECT_EQ(error_of(k3.f, {"--num-tokens=1.5"}), "--num-tokens: '1.5' is not an integer");
  KvFlags k4;
  EXPECT_EQ(error_of(k4.f, {"--head-size=99999999999999999999"}),
            "--head-size: '99999999999999999999' is out of range for a 64-bit integer");
}

TEST(CliFlags, NotANumber) {
  KvFlags k;
  EXPECT_EQ(error_of(k.f, {"--k-scale", "fast"}), "--k-scale: 'fast' is not a number");
  KvFlags k2;
  EXPECT_EQ(error_of(k2.f, {"--k-scale=nan"}), "--k-scale: 'nan' is not a number");
}

TEST(CliFlags, NotAChoice) {
  KvFlags k;
  EXPECT_EQ(error_of(k.f, {"--cache-dtype", "f64"}),
            "--cache-dtype: 'f64' is not one of f16, bf16, fp8_e4m3, fp8_e5m2");
  EXPECT_EQ(k.dtype, "f16");  // unchanged
}

TEST(CliFlags, RangeChecks) {
  KvFlags k;
  EXPECT_EQ(error_of(k.f, {"--num-tokens", "-3"}), "--num-tokens: -3 is below the minimum 0");
  KvFlags k2;
  EXPECT_EQ(error_of(k2.f, {"--num-tokens=2000000"}), "--num-tokens: 2000000 is above the maximum 1048576");
  KvFlags k3;
  k3.f.parse({"--num-tokens=0"});
  EXPECT_EQ(k3.tokens, 0);

  Flags d("vkattn t", "");
  d.add_double("ratio", 0.5, "", 0.0, 1.0);
  EXPECT_EQ(error_of(d, {"--ratio", "1.5"}), "--ratio: 1.5 is above the maximum 1");
}

TEST(CliFlags, UnknownFlagSuggestsNearest) {
  KvFlags k;
  EXPECT_EQ(error_of(k.f, {"--hed-size", "64"}),
            "unknown flag '--hed-size' for 'vkattn run write-kv-cache' (did you mean --head-size?)");
  KvFlags k2;
  EXPECT_EQ(error_of(k2.f, {"--cache-dtpye=f16"}),
            "unknown flag '--cache-dtpye' for 'vkattn run write-kv-cache' (did you mean --cache-dtype?)");
  KvFlags k3;
  EXPECT_EQ(error_of(k3.f, {"--no-verbsoe"}),
            "unknown flag '--no-verbsoe' for 'vkattn run write-kv-cache' (did you mean --no-verbose?)");
  KvFlags k4;  // unique prefix
  EXPECT_EQ(error_of(k4.f, {"--num=3"}),
            "unknown flag '--num' for 'vkattn run write-kv-cache' (did you mean --num-tokens?)");
}

TEST(CliFlags, UnknownFlagWithoutSuggestion) {
  KvFlags k;
  EXPECT_EQ(error_of(k.f, {"--zzzzzzzz"}), "unknown flag '--zzzzzzzz' for 'vkattn run write-kv-cache'");
  KvFlags k2;
  EXPECT_EQ(error_of(k2.f, {"-x"}), "unknown flag '-x' for 'vkattn run write-kv-cache'");
  KvFlags k3;  // --no- on a non-bool is not a thing
  EXPECT_NE(error_of(k3.f, {"--no-json"}).find("unknown flag '--no-json'"), std::string::npos);
}

TEST(CliFlags, NeedsAValue) {
  KvFlags k;
  EXPECT_EQ(error_of(k.f, {"--num-tokens"}), "--num-tokens needs a value");
  KvFlags k2;
  EXPECT_EQ(error_of(k2.f, {"--num-tokens", "--verbose"}), "--num-tokens needs a value");
  KvFlags k3;
  EXPECT_EQ(error_of(k3.f, {"--json"}), "--json needs a value");
  KvFlags k4;  // an explicit empty value is a value for a string
  k4.f.parse({"--json="});
  EXPECT_EQ(k4.json, "");
  EXPECT_TRUE(k4.f.was_set("json"));
}

TEST(CliFlags, UnexpectedArgument) {
  KvFlags k;
  EXPECT_EQ(error_of(k.f, {"foo"}), "unexpected argument 'foo'");
  KvFlags k2;
  EXPECT_EQ(error_of(k2.f, {"--num-tokens", "3", "4"}), "unexpected argument '4'");
  KvFlags k3;
  EXPECT_EQ(error_of(k3.f, {"-3"}), "unexpected argument '-3'");
  KvFlags k4;
  EXPECT_EQ(error_of(k4.f, {"--", "x"}), "unexpected argument 'x'");
}

TEST(CliFlags, UsageErrorIsRuntimeError) {
  KvFlags k;
  EXPECT_THROW(k.f.parse({"--bogus"}), std::runtime_error);
}

TEST(CliFlags, HelpRequested) {
  for (const char* h : {"--help", "-h"}) {
    KvFlags k;
    EXPECT_NO_THROW(k.f.parse({"--num-tokens", "abc", h, "--bogus"}));
    EXPECT_TRUE(k.f.help_requested()) << h;
  }
  KvFlags k;
  EXPECT_EQ(error_of(k.f, {"--", "--help"}), "unexpected argument '--help'");
  EXPECT_FALSE(k.f.help_requested());
}

TEST(CliFlags, HelpListsEveryFlagDefaultAndChoices) {
  KvFlags k;
  const std::string h = k.f.help();
  EXPECT_NE(h.find("usage: vkattn run write-kv-cache [flags]"), std::string::npos) << h;
  EXPECT_NE(h.find("Scatter new K/V tokens into the paged cache and verify"), std::string::npos);
  for (const char* name : {"--num-tokens", "--head-size", "--cache-dtype", "--k-scale", "--json",
                           "--[no-]verbose", "--batch", "--dtypes", "--help"})
    EXPECT_NE(h.find(name), std::string::npos) << name << "\n" << h;
  EXPECT_NE(h.find("default 37"), std::string::npos) << h;
  EXPECT_NE(h.find("range 0..1048576"), std::string::npos) << h;
  EXPECT_NE(h.find("default f16"), std::string::npos) << h;
  EXPECT_NE(h.find("one of f16, bf16, fp8_e4m3, fp8_e5m2"), std::string::npos) << h;
  EXPECT_NE(h.find("default 1,16"), std::string::npos) << h;
  EXPECT_NE(h.find("default false"), std::string::npos) << h;
  EXPECT_NE(h.find("tokens to write"), std::string::npos) << h;

  // Descriptions start in the same column on every flag line.
  std::size_t column = std::string::npos;
  std::size_t pos = h.find("flags:\n");
  ASSERT_NE(pos, std::string::npos);
  pos += 7;
  int lines = 0;
  while (pos < h.size()) {
    const std::size_t end = h.find('\n', pos);
    const std::string line = h.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t gap = line.find("  ", 2);
    ASSERT_NE(gap, std::string::npos) << line;
    const std::size_t desc = line.find_first_not_of(' ', gap);
    if (column == std::string::npos) column = desc;
    EXPECT_EQ(desc, column) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 9);
}

TEST(CliFlags, ReferencesStayValidAfterMoreFlagsAndMove) {
  auto f = std::make_unique<Flags>("vkattn t", "");
  std::int64_t& a = f->add_int("a", 1, "");
  for (int i = 0; i < 100; ++i) f->add_int("x" + std::to_string(i), i, "");
  Flags moved = std::move(*f);
  f.reset();
  moved.parse({"--a", "42"});
  EXPECT_EQ(a, 42);
}

TEST(CliFlags, BadRegistrationIsALogicError) {
  Flags f("vkattn t", "");
  f.add_int("n", 1, "");
  EXPECT_THROW(f.add_int("n", 1, ""), std::logic_error);
  EXPECT_THROW(f.add_int("m", -1, "", 0), std::logic_error);
  EXPECT_THROW(f.add_choice("c", "x", {"a", "b"}, ""), std::logic_error);
  EXPECT_THROW(f.add_bool("help", false, ""), std::logic_error);
  EXPECT_THROW((void)f.was_set("nope"), std::logic_error);
}

TEST(CliFlags, EditDistanceAndNearest) {
  using vkattn::cli::edit_distance;
  using vkattn::cli::nearest;
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
  EXPECT_EQ(nearest("hed-size", {"head-size", "num-tokens"}), std::optional<std::string>("head-size"));
  EXPECT_EQ(nearest("xyz", {"head-size", "num-tokens"}), std::nullopt);
  EXPECT_EQ(nearest("n", {"num-tokens", "num-heads"}), std::nullopt);
}

// --device becomes ContextOptions::device_index, an int: a larger value must
// be refused, not wrapped (2^32 would open device 0, 2^31 the best device).
TEST(CliDeviceFlag, OutOfIntRangeIsAUsageError) {
  vkattn::test::ScopedUnsetEnv no_env_device("VKATTN_DEVICE");
  for (const char* value : {"2147483648", "4294967296"}) {
    Flags f("vkattn info", "");
    vkattn::tool::DeviceFlags dev(f);
    EXPECT_EQ(error_of(f, {"--device", value}),
              std::string("--device: ") + value + " is above the maximum 2147483647");
  }
  Flags f("vkattn info", "");
  vkattn::tool::DeviceFlags dev(f);
  EXPECT_EQ(error_of(f, {"--device", "-2"}), "--device: -2 is below the minimum -1");
  EXPECT_EQ(error_of(f, {"--device", "2147483647"}), "");
  EXPECT_EQ(dev.options().device_index, 2147483647);
  EXPECT_EQ(error_of(f, {"--device", "-1"}), "");
  EXPECT_EQ(dev.options().device_index, -1);
}

}  // namespace
