// proto/batch: the rules a batch POST is built and checked with. The engine
// builds bodies and headers with them and the sink takes them apart, so a mistake here would be
// made identically on both sides; these tests pin the rules against independent references
// (Boost.JSON parsing the body, the openssl command line for the message id's digest).
#include "proto/batch.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace surge::proto {
namespace {

TEST(batch, is_json_value_accepts_one_value_of_any_kind) {
  for (const char* payload : {R"({"video":"v1","views":1e6})", "[1,2,3]", R"("text")", "42",
                              "-0.5e-3", "true", "false", "null", "{}", "[]"}) {
    EXPECT_TRUE(is_json_value(payload)) << payload;
  }
  // Whitespace around the one value is still one value: the array stays valid JSON.
  EXPECT_TRUE(is_json_value(" \n\t{\"a\":1} \r\n"));
}

TEST(batch, is_json_value_refuses_anything_that_would_break_the_array) {
  EXPECT_FALSE(is_json_value(""));
  EXPECT_FALSE(is_json_value("   \n "));
  EXPECT_FALSE(is_json_value(R"({"a":1}x)"));        // trailing garbage
  EXPECT_FALSE(is_json_value(R"({"a":1},)"));        // would add an element
  EXPECT_FALSE(is_json_value(R"({"a":1}{"b":2})"));  // two values
  EXPECT_FALSE(is_json_value("1 2"));
  EXPECT_FALSE(is_json_value(R"({"a":1)"));  // truncated
  EXPECT_FALSE(is_json_value("plain text"));
  EXPECT_FALSE(is_json_value("]"));  // would close the batch's array early
}

TEST(batch, body_is_an_array_of_the_payloads_bytes_unchanged_in_order) {
  // Unusual but valid spellings: a receiver verifying per-event signatures of its own would
  // need the exact bytes, so nothing may be re-serialised.
  const std::vector<std::string> payloads = {R"({"v": 1e6,  "s":"\u00e9"})", "[ 1 , 2 ]", " 7 ",
                                             R"("z")", R"({"n":null})"};
  const std::vector<std::string_view> views(payloads.begin(), payloads.end());
  const std::string body = batch_body(views);
  EXPECT_EQ(body, R"([{"v": 1e6,  "s":"\u00e9"},[ 1 , 2 ], 7 ,"z",{"n":null}])");

  const auto parsed = boost::json::parse(body);
  ASSERT_TRUE(parsed.is_array());
  const auto& array = parsed.as_array();
  ASSERT_EQ(array.size(), payloads.size());
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(array[i], boost::json::parse(payloads[i])) << i;
  }
  // Each payload's bytes appear in the body in queue order.
  std::size_t from = 0;
  for (const auto& payload : payloads) {
    const auto at = body.find(payload, from);
    ASSERT_NE(at, std::string::npos) << payload;
    from = at + payload.size();
  }
}

TEST(batch, body_bytes_matches_the_built_body) {
  std::vector<std::string> payloads;
  for (int count = 0; count <= 6; ++count) {
    std::vector<std::string_view> views(payloads.begin(), payloads.end());
    std::int64_t bytes = 0;
    for (const auto view : views) bytes += static_cast<std::int64_t>(view.size());
    EXPECT_EQ(batch_body_bytes(bytes, count), static_cast<std::int64_t>(batch_body(views).size()))
        << count << " payloads";
    payloads.push_back(std::string(static_cast<std::size_t>(count * 3 + 1), '9'));
  }
  EXPECT_EQ(batch_body({}), "[]");
}

TEST(batch, delivery_ids_round_trip) {
  const std::vector<std::vector<std::int64_t>> cases = {
      {1}, {3, 1, 2}, {42, 43, 44, 45}, {9'007'199'254'740'993, 1}};
  for (const auto& ids : cases) {
    const auto header = delivery_ids_header(ids);
    EXPECT_EQ(header.find(' '), std::string::npos) << header;
    const auto parsed = parse_delivery_ids(header);
    ASSERT_TRUE(parsed) << header;
    EXPECT_EQ(*parsed, ids) << header;  // body order, not sorted
  }
  EXPECT_EQ(delivery_ids_header(std::vector<std::int64_t>{7, 5, 6}), "7,5,6");
}

TEST(batch, parse_delivery_ids_refuses_anything_but_positive_integers) {
  for (const char* header : {"", "1,,2", "a", "-1", "1, 2", "0", "1,", ",1", "+1", "1.5", " 1",
                             "1 ", "1,0", "99999999999999999999", "0x10"}) {
    EXPECT_FALSE(parse_delivery_ids(header)) << '"' << header << '"';
  }
}

// The reference: `openssl dgst -sha256` over the sorted ids as the header would carry them.
std::string openssl_sha256_hex(const std::string& text) {
  char path[] = "/tmp/surge_proto_batch_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  std::string output;
  if (written) {
    if (FILE* pipe = popen((std::string("openssl dgst -sha256 ") + path).c_str(), "r")) {
      char buffer[256];
      while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
      pclose(pipe);
    }
  }
  unlink(path);
  const auto equals = output.rfind("= ");
  return equals == std::string::npos ? "unexpected openssl output: " + output
                                     : output.substr(equals + 2, 64);
}

TEST(batch, message_id_is_stable_for_the_same_rows_in_any_order) {
  std::vector<std::int64_t> ids = {17, 3, 250, 9};
  const auto id = batch_message_id(ids);
  EXPECT_EQ(id.rfind("msg_batch_", 0), 0u) << id;
  EXPECT_EQ(id.size(), std::string("msg_batch_").size() + 16);
  EXPECT_EQ(id.substr(10), openssl_sha256_hex("3,9,17,250").substr(0, 16));
  std::sort(ids.begin(), ids.end());
  do {
    EXPECT_EQ(batch_message_id(ids), id);
  } while (std::next_permutation(ids.begin(), ids.end()));
}

TEST(batch, message_id_differs_for_different_rows) {
  const std::vector<std::vector<std::int64_t>> sets = {
      {1}, {2}, {1, 2}, {12}, {1, 2, 3}, {1, 23}, {12, 3}, {17, 3, 250, 9}, {17, 3, 250}};
  std::set<std::string> seen;
  for (const auto& ids : sets) {
    const auto id = batch_message_id(ids);
    EXPECT_EQ(id.rfind("msg_batch_", 0), 0u) << id;
    EXPECT_TRUE(seen.insert(id).second) << "collision for " << delivery_ids_header(ids);
  }
}

TEST(batch, event_count_reads_the_array) {
  EXPECT_EQ(batch_event_count("[]"), 0u);
  EXPECT_EQ(batch_event_count(R"([{"a":1},{"b":[1,2,3]},7])"), 3u);
  EXPECT_EQ(batch_event_count("[[1,2,3]]"), 1u);  // one event that is itself an array
  EXPECT_EQ(batch_event_count(" [1, 2] "), 2u);
  const std::vector<std::string> payloads = {"1", "2", R"({"x":[3,4]})"};
  const std::vector<std::string_view> views(payloads.begin(), payloads.end());
  EXPECT_EQ(batch_event_count(batch_body(views)), payloads.size());

  EXPECT_FALSE(batch_event_count(R"({"a":1})"));  // a single event is not a batch
  EXPECT_FALSE(batch_event_count("7"));
  EXPECT_FALSE(batch_event_count(""));
  EXPECT_FALSE(batch_event_count("[1,2"));
  EXPECT_FALSE(batch_event_count("[1] [2]"));
}

}  // namespace
}  // namespace surge::proto
