#include "engine/net/response_reader.hpp"

#include <string_view>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>

namespace surge::engine {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using proto::transport_error;

namespace {

bool is_timeout(const error_code& ec) {
  return ec == beast::error::timeout || ec == asio::error::timed_out;
}

bool is_eof(const error_code& ec) {
  return ec == asio::error::eof || ec == http::error::end_of_stream ||
         ec == asio::ssl::error::stream_truncated;
}

// A read that ends before any response byte: the peer closed or reset after our request.
bool is_peer_gone(const error_code& ec) {
  return is_eof(ec) || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted;
}

bool is_parse_error(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_version).category();
}

// A control byte in the header section (other than HTAB, and the CR LF that end its lines)
// fails Beast's parser, and with it a response the partner meant: a 2xx would be sent again.
// RFC 9110 section 5.5 lets a recipient replace such bytes instead. They become obs-text
// (0x80), which the parser accepts and which no field Surge reads accepts: a field Surge does
// not need is left alone, and a Retry-After or quota field that held one is malformed as a
// whole and ignored, as the draft says. A bare CR becomes SP, as section 5.5 asks. Only the
// bytes before the header's end are touched: the body is the partner's.
void soften_header_controls(beast::flat_buffer& buffer) {
  const auto data = buffer.data();
  char* const bytes = static_cast<char*>(data.data());
  const std::string_view held(bytes, data.size());
  const auto header_end = held.find("\r\n\r\n");
  const std::size_t end = header_end == std::string_view::npos ? held.size() : header_end;
  for (std::size_t i = 0; i < end; ++i) {
    const auto byte = static_cast<unsigned char>(bytes[i]);
    if (byte == '\r') {
      if (i + 1 < held.size() && held[i + 1] != '\n') bytes[i] = ' ';
    } else if ((byte < 0x20 && byte != '\t' && byte != '\n') || byte == 0x7f) {
      bytes[i] = static_cast<char>(0x80);
    }
  }
}

}  // namespace

response_reader::response_reader(const http_client_config& config) : config_(config) {
  start_parser();
}

void response_reader::start_parser() {
  parser_.emplace();
  prepare_for_header(*parser_, config_);
  // The interim responses already read count against the one header budget, so a peer cannot
  // stretch the header phase by splitting it into many small 1xx responses.
  parser_->header_limit(static_cast<std::uint32_t>(config_.max_response_header - header_bytes_));
  parser_->eager(false);
  in_body_ = false;
}

void response_reader::fail(transport_error error, std::string detail) {
  finished_ = true;
  final_ = false;
  error_ = error;
  detail_ = std::move(detail);
}

void response_reader::finish(bool read_whole, std::string detail) {
  finished_ = true;
  read_whole_ = read_whole;
  detail_ = std::move(detail);
}

response_reader::progress response_reader::on_bytes(beast::flat_buffer& buffer) {
  while (!finished_ && buffer.size() > 0) {
    any_byte_ = true;
    error_code ec;
    auto offered = buffer.data();
    if (!in_body_) {
      soften_header_controls(buffer);
      // A CR that ends what has arrived is undecided (the next read may bring its LF); Beast
      // judges it bare at once, so it waits: where the reads split a response must not matter.
      if (static_cast<const char*>(offered.data())[offered.size() - 1] == '\r') {
        if (offered.size() == 1) return progress::need_more;
        offered = boost::asio::buffer(offered.data(), offered.size() - 1);
      }
    }
    const auto used = parser_->put(offered, ec);
    buffer.consume(used);
    if (!in_body_) {
      header_bytes_ += used;
      if (ec == http::error::need_more) return progress::need_more;
      if (ec) {
        fail(transport_error::protocol, "bad response: " + ec.message());
        break;
      }
      if (!parser_->is_header_done()) return progress::need_more;
      on_header();
      continue;
    }
    // A chunk header split across reads, for one.
    if (ec == http::error::need_more) return progress::need_more;
    if (ec == http::error::body_limit) {
      finish(false);
    } else if (ec) {
      finish(false, "response body: " + ec.message());
    } else if (parser_->is_done()) {
      finish(true);
    } else if (used == 0) {
      return progress::need_more;
    }
  }
  return finished_ ? progress::done : progress::need_more;
}

void response_reader::on_header() {
  const int status = parser_->status();
  if (status == 101) {
    switching_ = true;
    fail(transport_error::protocol, "101 Switching Protocols in answer to a POST");
    return;
  }
  if (status < 100) {
    fail(transport_error::protocol, "invalid status " + std::to_string(status));
    return;
  }
  if (status < 200) {
    // Beast reads a 1xx as a header without a body, so the parser is done here and whatever
    // follows in the buffer is the next response.
    // Counted once accepted, so interim_responses() never reports more than the cap.
    if (interim_ == max_interim_responses) {
      fail(transport_error::protocol,
           "more than " + std::to_string(max_interim_responses) + " interim responses");
    } else if (header_bytes_ >= config_.max_response_header) {
      fail(transport_error::protocol, "interim responses exceed the header limit");
    } else {
      ++interim_;
      start_parser();
    }
    return;
  }
  final_ = true;
  status_ = status;
  retry_after_ = parser_->retry_after();
  quota_ = std::move(parser_->quota());
  if (parser_->is_done()) {
    finish(true);
    return;
  }
  const auto announced = parser_->content_length();
  if (announced && *announced > config_.max_response_body) {
    // Beast checks body_limit against Content-Length only while parsing the header, so a large
    // announced body is not read at all: the status is what counts, the connection is dropped.
    finish(false, "response body of " + std::to_string(*announced) + " bytes not read");
    return;
  }
  prepare_for_body(*parser_, config_);
  parser_->eager(true);
  in_body_ = true;
}

void response_reader::on_end(const error_code& ec) {
  if (finished_) return;
  if (in_body_) {
    if (is_timeout(ec)) {
      finish(false, "response body not finished by the attempt deadline");
      return;
    }
    error_code eof_ec;
    if (is_eof(ec)) parser_->put_eof(eof_ec);
    if (is_eof(ec) && !eof_ec && parser_->is_done()) {
      finish(true);  // a body delimited by the end of the connection
    } else {
      // The status already arrived and stands; only the connection is lost.
      finish(false, "response body: " + (eof_ec ? eof_ec : ec).message());
    }
    return;
  }
  if (is_timeout(ec)) {
    fail(transport_error::timeout, "no response before the attempt deadline");
  } else if (!any_byte_ && is_peer_gone(ec)) {
    fail(transport_error::reset_before_response,
         "connection closed before a response: " + ec.message());
  } else if (interim_ > 0 && !parser_->got_some()) {
    fail(transport_error::receive, "connection closed after " + std::to_string(interim_) +
                                       " interim response(s): " + ec.message());
  } else if (is_eof(ec)) {
    fail(transport_error::protocol, "bad response: the header ends early");
  } else if (is_parse_error(ec)) {
    fail(transport_error::protocol, "bad response: " + ec.message());
  } else {
    fail(transport_error::receive, "reading response: " + ec.message());
  }
}

void response_reader::on_deadline() {
  if (finished_) return;
  if (in_body_) {
    finish(false, "response body not finished by the attempt deadline");
  } else {
    fail(transport_error::timeout, "no response before the attempt deadline");
  }
}

std::string response_reader::body_prefix() const {
  if (!final_) return {};
  return parser_->body();  // never above max_response_body (prepare_for_body)
}

response_end response_reader::end(const beast::flat_buffer& buffer) const {
  response_end out;
  out.final_status = final_ && finished_;
  out.switching_protocols = switching_;
  // The parser's keep_alive also says no when the body is delimited by EOF.
  out.keep_alive = final_ && parser_->is_header_done() && parser_->keep_alive();
  out.read_whole = final_ && read_whole_;
  out.bytes_left = buffer.size() > 0;
  return out;
}

}  // namespace surge::engine
