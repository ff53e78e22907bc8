// libFuzzer: Retry-After parsing never crashes and never exceeds its cap.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "proto/retry_after.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto now = std::chrono::system_clock::time_point{} + std::chrono::seconds(1'700'000'000);
  const auto cap = std::chrono::seconds(3600);
  const auto delay = surge::proto::parse_retry_after(text, now, cap);
  if (delay && (delay->count() < 0 || *delay > cap)) std::abort();
  return 0;
}
