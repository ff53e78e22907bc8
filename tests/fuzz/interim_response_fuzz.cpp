// libFuzzer: the response reader with interleaved interim responses, pipelined bytes and split
// reads. The input is [mode][k][k chunk sizes][wire bytes]: the wire arrives in the chunk sizes
// given (cycled), and `mode` says how the stream ends if the reader still wants more. Invariants:
// no 1xx (or other non-final status) is ever reported as the answer; a connection is reusable
// only when the final response was read whole and nothing beyond it is buffered; how the bytes
// were split changes nothing.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "engine/net/response_reader.hpp"

namespace {

using surge::engine::response_reader;

struct run {
  surge::engine::http_client_config config;
  boost::beast::flat_buffer buffer;
  response_reader reader{config};
  std::size_t fed = 0;
};

void check(bool condition) {
  if (!condition) std::abort();
}

void feed(run& r, std::string_view wire, const std::vector<std::size_t>& sizes, std::uint8_t mode) {
  auto progress = r.reader.on_bytes(r.buffer);
  const auto wants_more = [&] { return progress == response_reader::progress::need_more; };
  for (std::size_t i = 0; r.fed < wire.size() && wants_more(); ++i) {
    const auto size = std::min(sizes[i % sizes.size()], wire.size() - r.fed);
    auto space = r.buffer.prepare(size);
    boost::asio::buffer_copy(space, boost::asio::buffer(wire.data() + r.fed, size));
    r.buffer.commit(size);
    r.fed += size;
    progress = r.reader.on_bytes(r.buffer);
  }
  if (wants_more()) {
    switch (mode % 4) {
      case 0: r.reader.on_end(boost::asio::error::eof); break;
      case 1: r.reader.on_end(boost::asio::error::connection_reset); break;
      case 2: r.reader.on_end(boost::beast::error::timeout); break;
      default: r.reader.on_deadline(); break;
    }
  }
}

void check_invariants(const run& r) {
  check(r.reader.done());
  const int status = r.reader.status();
  const auto end = r.reader.end(r.buffer);
  if (status != 0) {
    check(status >= 200);
    check(r.reader.error() == surge::proto::transport_error::none);
    check(end.final_status);
  } else {
    check(r.reader.error() != surge::proto::transport_error::none);
    check(!end.final_status);
  }
  check(r.reader.interim_responses() <= surge::engine::max_interim_responses);
  check(r.reader.body_prefix().size() <= r.config.max_response_body);
  if (surge::engine::reusable_after(end)) {
    check(r.buffer.size() == 0);
    check(end.read_whole && end.keep_alive && status >= 200);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t mode = data[0];
  const std::size_t count = std::min<std::size_t>(data[1] % 8, size - 2);
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < count; ++i) sizes.push_back(data[2 + i] % 64 + 1);
  if (sizes.empty()) sizes.push_back(1);
  const std::string_view wire(reinterpret_cast<const char*>(data) + 2 + count, size - 2 - count);

  run split;
  feed(split, wire, sizes, mode);
  check_invariants(split);

  run whole;
  feed(whole, wire, {wire.size() + 1}, mode);
  check_invariants(whole);
  // Read boundaries are the network's business, not the response's.
  check(split.reader.status() == whole.reader.status());
  check(split.reader.interim_responses() == whole.reader.interim_responses());
  return 0;
}
