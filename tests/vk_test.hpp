// Test fixture for anything that needs a device: one Context per test, with the
// validation layers on whenever they are installed (VKATTN_VALIDATION=0 turns
// them off) and the path forced by VKATTN_PATH when set. Any validation error
// fails the test.
#pragma once
#include <gtest/gtest.h>
#include <vkattn/vkattn.hpp>

#include <cstdlib>
#include <memory>
#include <string>

#include "test_env.hpp"

namespace vkattn::test {

inline ContextOptions test_options() {
  ContextOptions o;
  const char* v = std::getenv("VKATTN_VALIDATION");
  o.validation = !(v && std::string(v) == "0");
  return o;
}

class VkTest : public ::testing::Test {
 protected:
  void SetUp() override { ctx_ = std::make_unique<Context>(test_options()); }
  void TearDown() override {
    if (!ctx_) return;
    for (const auto& m : ctx_->validation_messages()) ADD_FAILURE() << "validation error: " << m;
    ctx_.reset();
  }
  Context& ctx() { return *ctx_; }
  std::unique_ptr<Context> ctx_;
};

// EXPECT that `statement` throws vkattn::Error whose message contains every given fragment.
#define EXPECT_VKATTN_ERROR(statement, ...)                                            \
  do {                                                                                 \
    try {                                                                              \
      statement;                                                                       \
      ADD_FAILURE() << "expected vkattn::Error from: " #statement;                     \
    } catch (const ::vkattn::Error& e) {                                               \
      for (const char* frag : {__VA_ARGS__})                                           \
        EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)                 \
            << "message '" << e.what() << "' lacks '" << frag << "'";                  \
    }                                                                                  \
  } while (0)

}  // namespace vkattn::test
