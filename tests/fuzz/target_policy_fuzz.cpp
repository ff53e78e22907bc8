// libFuzzer: URL parsing and the address classifier never crash, and an accepted URL always has
// what the client relies on.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "proto/target_policy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = surge::proto::parse_target_url(text);
  if (parsed.value) {
    const auto& target = *parsed.value;
    if (target.host.empty() || target.port == 0 || target.path.empty() || target.path[0] != '/') {
      std::abort();
    }
    if (target.host.find_first_of("\r\n ") != std::string::npos) std::abort();
  } else if (parsed.error.empty()) {
    std::abort();  // a refusal must say why
  }
  if (const auto address = surge::proto::ip_address::parse(text)) {
    (void)surge::proto::classify_address(*address);
  }
  if (size >= 16) {
    surge::proto::ip_address raw;
    raw.v6 = (data[0] & 1) != 0;
    for (std::size_t i = 0; i < 16; ++i) raw.bytes[i] = data[i];
    (void)surge::proto::to_string(surge::proto::classify_address(raw));
  }
  return 0;
}
