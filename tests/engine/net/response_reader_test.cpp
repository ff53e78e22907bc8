// The response reader without sockets: interim responses, pipelined bytes and split reads.
#include "engine/net/response_reader.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "proto/retry_after.hpp"

namespace surge::engine {
namespace {

using progress = response_reader::progress;

// Feeds `wire` to a reader in pieces of `piece` bytes, as reads would return them.
struct fed {
  http_client_config config;
  boost::beast::flat_buffer buffer;
  response_reader reader{config};
  progress last = progress::need_more;

  explicit fed(const std::string& wire, std::size_t piece = 1 << 20) {
    for (std::size_t at = 0; at < wire.size() && last == progress::need_more; at += piece) {
      const auto chunk = wire.substr(at, piece);
      auto space = buffer.prepare(chunk.size());
      boost::asio::buffer_copy(space, boost::asio::buffer(chunk));
      buffer.commit(chunk.size());
      last = reader.on_bytes(buffer);
    }
  }
  bool reusable() const { return reusable_after(reader.end(buffer)); }
};

const std::string continue_100 = "HTTP/1.1 100 Continue\r\n\r\n";
const std::string ok_200 = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const std::string error_500 = "HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nfail";

TEST(ResponseReader, SkipsOneContinueBeforeTheFinalStatus) {
  for (std::size_t piece : {1, 3, 7, 1000}) {
    fed f(continue_100 + error_500, piece);
    ASSERT_EQ(f.last, progress::done) << piece;
    EXPECT_EQ(f.reader.status(), 500) << piece;
    EXPECT_EQ(f.reader.body_prefix(), "fail");
    EXPECT_EQ(f.reader.interim_responses(), 1);
    EXPECT_TRUE(f.reusable());
  }
}

TEST(ResponseReader, AContinueAloneIsNotAnAnswer) {
  fed f(continue_100);
  EXPECT_EQ(f.last, progress::need_more);
  EXPECT_EQ(f.reader.status(), 0);
  f.reader.on_end(boost::asio::error::eof);
  EXPECT_EQ(f.reader.status(), 0);
  EXPECT_EQ(f.reader.error(), proto::transport_error::receive);
  EXPECT_FALSE(f.reusable());

  fed late(continue_100);
  late.reader.on_deadline();
  EXPECT_EQ(late.reader.status(), 0);
  EXPECT_EQ(late.reader.error(), proto::transport_error::timeout);
}

TEST(ResponseReader, SkipsEarlyHintsWithHeadersAndSeveralInterims) {
  const std::string hints =
      "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
      "HTTP/1.1 102 Processing\r\n\r\n";
  fed f(hints + continue_100 + ok_200, 5);
  ASSERT_EQ(f.last, progress::done);
  EXPECT_EQ(f.reader.status(), 200);
  EXPECT_EQ(f.reader.interim_responses(), 3);
  EXPECT_TRUE(f.reusable());
}

TEST(ResponseReader, AChunkedBodySplitAnywhereIsReadWhole) {
  const std::string chunked =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n3\r\n!!!\r\n0\r\n\r\n";
  for (std::size_t piece : {1, 2, 5, 1000}) {
    fed f(continue_100 + chunked, piece);
    ASSERT_EQ(f.last, progress::done) << piece;
    EXPECT_EQ(f.reader.status(), 200);
    EXPECT_EQ(f.reader.body_prefix(), "ok!!!") << piece;
    EXPECT_EQ(f.reader.detail(), "") << piece;
    EXPECT_TRUE(f.reusable()) << piece;
  }
}

TEST(ResponseReader, BytesAfterTheResponseStayAndForbidReuse) {
  fed f(continue_100 + ok_200 + error_500);
  ASSERT_EQ(f.last, progress::done);
  EXPECT_EQ(f.reader.status(), 200);
  EXPECT_EQ(f.buffer.size(), error_500.size());
  EXPECT_FALSE(f.reusable());
}

TEST(ResponseReader, CapsInterimResponses) {
  std::string wire;
  for (int i = 0; i <= max_interim_responses; ++i) wire += continue_100;
  fed f(wire + ok_200);
  ASSERT_EQ(f.last, progress::done);
  EXPECT_EQ(f.reader.status(), 0);
  EXPECT_EQ(f.reader.error(), proto::transport_error::protocol);
  EXPECT_FALSE(f.reusable());
  // The one past the cap is refused, not counted (the interim fuzzer found 17 reported).
  EXPECT_EQ(f.reader.interim_responses(), max_interim_responses);

  std::string few;
  for (int i = 0; i < max_interim_responses; ++i) few += continue_100;
  fed g(few + ok_200);
  EXPECT_EQ(g.reader.status(), 200);
}

TEST(ResponseReader, InterimHeadersShareTheHeaderLimit) {
  const std::string big_hint =
      "HTTP/1.1 103 Early Hints\r\nLink: <" + std::string(6000, 'a') + ">\r\n\r\n";
  fed f(big_hint + big_hint + big_hint + ok_200);  // each fits 16 KiB, together they do not
  ASSERT_EQ(f.last, progress::done);
  EXPECT_EQ(f.reader.status(), 0);
  EXPECT_EQ(f.reader.error(), proto::transport_error::protocol);
}

TEST(ResponseReader, SwitchingProtocolsIsAProtocolError) {
  fed f("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n" + ok_200);
  ASSERT_EQ(f.last, progress::done);
  EXPECT_EQ(f.reader.status(), 0);
  EXPECT_EQ(f.reader.error(), proto::transport_error::protocol);
  const auto end = f.reader.end(f.buffer);
  EXPECT_TRUE(end.switching_protocols);
  EXPECT_FALSE(reusable_after(end));
}

TEST(ResponseReader, ConnectionCloseAndHttp10AreNotReused) {
  fed closing("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(closing.reader.status(), 200);
  EXPECT_FALSE(closing.reusable());

  fed old("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(old.reader.status(), 200);
  EXPECT_FALSE(old.reusable());

  fed old_kept("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n");
  EXPECT_TRUE(old_kept.reusable());

  // A body delimited by the end of the connection.
  fed to_eof("HTTP/1.1 200 OK\r\n\r\nbody");
  EXPECT_EQ(to_eof.last, progress::need_more);
  to_eof.reader.on_end(boost::asio::error::eof);
  EXPECT_EQ(to_eof.reader.status(), 200);
  EXPECT_EQ(to_eof.reader.body_prefix(), "body");
  EXPECT_FALSE(to_eof.reusable());
}

TEST(ResponseReader, AnUnreadBodyKeepsTheStatusButNotTheConnection) {
  fed big("HTTP/1.1 503 Busy\r\nRetry-After: 7\r\nContent-Length: 99999999\r\n\r\nxx");
  ASSERT_EQ(big.last, progress::done);
  EXPECT_EQ(big.reader.status(), 503);
  EXPECT_EQ(big.reader.retry_after(), "7");
  EXPECT_FALSE(big.reusable());

  fed cut("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  cut.reader.on_deadline();
  EXPECT_EQ(cut.reader.status(), 200);
  EXPECT_FALSE(cut.reusable());
}

// A partner that streams chunks for ever: the reader is done once max_response_body is read, so
// what a hostile body costs is bounded whatever it sends (bytes and memory).
TEST(ResponseReader, AnEndlessChunkedBodyEndsAtTheBodyCap) {
  http_client_config config;
  boost::beast::flat_buffer buffer;
  response_reader reader{config};
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk = "400\r\n" + std::string(1024, 'x') + "\r\n";
  auto offer = [&](const std::string& bytes) {
    auto space = buffer.prepare(bytes.size());
    boost::asio::buffer_copy(space, boost::asio::buffer(bytes));
    buffer.commit(bytes.size());
    return reader.on_bytes(buffer);
  };
  auto last = offer(head);
  std::size_t body_offered = 0;
  while (last == progress::need_more && body_offered < 1024 * 1024) {
    last = offer(chunk);
    body_offered += 1024;
  }
  ASSERT_EQ(last, progress::done) << "still reading after " << body_offered << " bytes";
  EXPECT_LE(body_offered, config.max_response_body + 2 * 1024);
  EXPECT_EQ(reader.status(), 200);
  EXPECT_LE(reader.body_prefix().size(), config.max_response_body);
  EXPECT_FALSE(reusable_after(reader.end(buffer)));
}

TEST(ResponseReader, NothingAtAllIsAResetBeforeTheResponse) {
  fed nothing("");
  nothing.reader.on_end(boost::asio::error::connection_reset);
  EXPECT_EQ(nothing.reader.error(), proto::transport_error::reset_before_response);
  EXPECT_FALSE(nothing.reader.any_byte());
}

TEST(ResponseReader, StatusBelow100IsRefused) {
  fed f("HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(f.reader.status(), 0);
  EXPECT_EQ(f.reader.error(), proto::transport_error::protocol);
}

TEST(ResponseReader, KeepsTheFinalResponsesQuotaFieldsOnly) {
  const std::string hints = "HTTP/1.1 103 Early Hints\r\nRateLimit: \"early\";r=1;t=1\r\n\r\n";
  const std::string answer =
      "HTTP/1.1 200 OK\r\nratelimit-policy: \"day\";q=100;w=60\r\nRateLimit: \"day\";r=5;t=30\r\n"
      "X-RateLimit-Remaining: 5\r\nx-ratelimit-reset: 30\r\nX-RateLimit-Limit: 100\r\n"
      "X-RateLimit-Used: 95\r\nServer: test\r\nContent-Length: 2\r\n\r\nok";
  for (std::size_t piece : {1, 5, 1000}) {
    fed f(hints + answer, piece);
    ASSERT_EQ(f.last, progress::done) << piece;
    const auto lines = f.reader.take_quota();
    ASSERT_EQ(lines.size(), 5u) << piece;
    EXPECT_EQ(lines[0].field, proto::quota_field::ratelimit_policy);
    EXPECT_EQ(lines[0].value, "\"day\";q=100;w=60");
    EXPECT_EQ(lines[1].field, proto::quota_field::ratelimit);
    EXPECT_EQ(lines[1].value, "\"day\";r=5;t=30");
    EXPECT_EQ(lines[2].field, proto::quota_field::x_remaining);
    EXPECT_EQ(lines[3].field, proto::quota_field::x_reset);
    EXPECT_EQ(lines[4].field, proto::quota_field::x_limit);
    const auto fields = to_quota_fields(lines);
    const auto quota = proto::parse_announced_quota(fields, std::chrono::system_clock::now());
    ASSERT_TRUE(quota.has_value());
    EXPECT_EQ(quota->remaining, 5u);
  }
}

// RFC 9110 section 5.5: a recipient may be lenient with control bytes in a field value. A 2xx
// the partner accepted is never failed by a byte in a header Surge does not need, and a quota
// field holding one is ignored as a whole, never read as a pause.
TEST(ResponseReader, AControlByteInAHeaderNeitherFailsTheResponseNorPacesThePartner) {
  const std::string answer =
      "HTTP/1.1 200 O\x01K\r\nX-Note: a\x7f"
      "b\x01"
      "c\r\nRateLimit: \"q\";r=0;t=600\x7f\r\n"
      "Retry-After: 600\x01\r\nX-Bare: a\rb\r\nContent-Length: 4\r\n\r\n\x01\x7f\r\n";
  for (std::size_t piece : {1, 5, 1000}) {
    fed f(answer, piece);
    ASSERT_EQ(f.last, progress::done) << piece << " " << f.reader.detail();
    EXPECT_EQ(f.reader.status(), 200) << piece;
    EXPECT_EQ(f.reader.error(), proto::transport_error::none) << piece;
    EXPECT_EQ(f.reader.body_prefix(), "\x01\x7f\r\n") << "the body is the partner's";
    const auto lines = f.reader.take_quota();
    const auto quota =
        proto::parse_announced_quota(to_quota_fields(lines), std::chrono::system_clock::now());
    EXPECT_FALSE(quota.has_value()) << "a malformed quota field is ignored as a whole";
    EXPECT_FALSE(proto::parse_retry_after(f.reader.retry_after(), std::chrono::system_clock::now(),
                                          std::chrono::hours(1))
                     .has_value());
    EXPECT_TRUE(f.reusable());
  }
}

// Where the reads split a response must not matter: a CR that ends what has arrived may be
// the start of a CRLF, so it is not judged bare until the next byte is there (a status line
// split right after "200\r" once failed as a bad status while the whole read as 200).
TEST(ResponseReader, ABareCrReadsTheSameWhereverTheReadsSplit) {
  const std::string answer =
      "HTTP/1.1 100\rGo\r\n\r\nHTTP/1.1 200\rOK\r\nContent-Length: 2\r\n\r\nok";
  for (std::size_t piece = 1; piece <= answer.size(); ++piece) {
    fed f(answer, piece);
    ASSERT_EQ(f.last, progress::done) << piece << " " << f.reader.detail();
    EXPECT_EQ(f.reader.status(), 200) << piece << " " << f.reader.detail();
    EXPECT_EQ(f.reader.interim_responses(), 1) << piece;
    EXPECT_EQ(f.reader.body_prefix(), "ok") << piece;
  }
}

TEST(ResponseReader, AResponseWithoutQuotaFieldsHasNone) {
  fed f(ok_200);
  ASSERT_EQ(f.last, progress::done);
  EXPECT_TRUE(f.reader.take_quota().empty());
}

TEST(ResponseReader, KeepsABoundedNumberOfQuotaLines) {
  std::string many = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 100; ++i) many += "RateLimit: \"a\";r=1;t=1\r\n";
  fed f(many + "Content-Length: 0\r\n\r\n");
  ASSERT_EQ(f.last, progress::done);
  const auto lines = f.reader.take_quota();
  EXPECT_EQ(lines.size(), max_quota_lines);
  // More lines than a field may have: the parse ignores it.
  EXPECT_TRUE(to_quota_fields(lines).lines(proto::quota_field::ratelimit).empty());
}

}  // namespace
}  // namespace surge::engine
