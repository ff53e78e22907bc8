#include "storage/sqlite/subscribers.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

subscriber_row sample(std::int64_t id = 0) {
  subscriber_row row;
  row.id = id;
  row.url = "https://a.example/hook?x=1";
  row.secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  row.event_types = "video.*, channel.created";
  row.rate_per_sec = 0.5;
  row.burst = 3;
  row.tokens = 1.25;
  row.tokens_updated_at = 1700000000.5;
  row.active = false;
  row.signing = "standard";
  row.max_in_flight = 16;
  return row;
}

void expect_same(const subscriber_row& a, const subscriber_row& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.url, b.url);
  EXPECT_EQ(a.secret, b.secret);
  EXPECT_EQ(a.event_types, b.event_types);
  EXPECT_EQ(a.rate_per_sec, b.rate_per_sec);
  EXPECT_EQ(a.burst, b.burst);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens_updated_at, b.tokens_updated_at);
  EXPECT_EQ(a.active, b.active);
  EXPECT_EQ(a.signing, b.signing);
  EXPECT_EQ(a.max_in_flight, b.max_in_flight);
}

class Subscribers : public ::testing::Test {
 protected:
  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
};

TEST_F(Subscribers, AddChoosesAnIdAndLoadReturnsEveryColumn) {
  subscriber_row row = sample();
  row.id = add_subscriber(db_, row);
  EXPECT_GT(row.id, 0);
  const auto loaded = load_subscriber(db_, row.id);
  ASSERT_TRUE(loaded.has_value());
  expect_same(*loaded, row);
}

TEST_F(Subscribers, AddKeepsAnExplicitId) {
  EXPECT_EQ(add_subscriber(db_, sample(42)), 42);
  EXPECT_TRUE(load_subscriber(db_, 42).has_value());
  EXPECT_FALSE(load_subscriber(db_, 43).has_value());
}

TEST_F(Subscribers, RowsFromTheOtherProgramGetDefaults) {
  const auto id = testing::insert_subscriber_old(db_);
  const auto loaded = load_subscriber(db_, id);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->event_types, "*");
  EXPECT_EQ(loaded->tokens, 10.0);
  EXPECT_TRUE(loaded->active);
  EXPECT_EQ(loaded->signing, "vvv");
  EXPECT_EQ(loaded->max_in_flight, 0);
}

TEST_F(Subscribers, LoadAllOrSomeByIdOrder) {
  for (const std::int64_t id : {5, 1, 3, 12, 7}) add_subscriber(db_, sample(id));
  std::vector<std::int64_t> ids;
  for (const auto& row : load_subscribers(db_)) ids.push_back(row.id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{1, 3, 5, 7, 12}));

  const auto which = proto::id_set::parse("1,4-7,100");
  ASSERT_TRUE(which.has_value());
  ids.clear();
  for (const auto& row : load_subscribers(db_, *which)) ids.push_back(row.id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{1, 5, 7}));
  expect_same(load_subscribers(db_, *which).front(), sample(1));
}

TEST_F(Subscribers, UpdateWritesEverythingButTheBucket) {
  const auto id = add_subscriber(db_, sample());
  subscriber_row changed = sample(id);
  changed.url = "https://b.example/";
  changed.secret = "other";
  changed.event_types = "*";
  changed.rate_per_sec = 50;
  changed.burst = 100;
  changed.tokens = 99;
  changed.tokens_updated_at = 5;
  changed.active = true;
  changed.signing = "vvv";
  changed.max_in_flight = 2;
  EXPECT_TRUE(update_subscriber(db_, changed));

  subscriber_row expected = changed;
  expected.tokens = sample().tokens;
  expected.tokens_updated_at = sample().tokens_updated_at;
  expect_same(*load_subscriber(db_, id), expected);

  EXPECT_FALSE(update_subscriber(db_, sample(id + 1)));
}

TEST_F(Subscribers, SetActive) {
  const auto id = add_subscriber(db_, sample());
  EXPECT_TRUE(set_subscriber_active(db_, id, true));
  EXPECT_TRUE(load_subscriber(db_, id)->active);
  EXPECT_TRUE(set_subscriber_active(db_, id, false));
  EXPECT_FALSE(load_subscriber(db_, id)->active);
  EXPECT_FALSE(set_subscriber_active(db_, id + 1, true));
}

TEST_F(Subscribers, LimitsThatAreNotNumbersAreReportedAsStored) {
  const auto id = add_subscriber(db_, sample());
  const auto ok = load_subscriber(db_, id);
  ASSERT_TRUE(ok.has_value());
  EXPECT_FALSE(ok->rate_text.has_value());
  EXPECT_FALSE(ok->burst_text.has_value());
  db_.exec("UPDATE webhook_subscriber SET rate_per_sec = 'fast', burst = 'it''s big' WHERE id = " +
           std::to_string(id));
  const auto bad = load_subscriber(db_, id);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->rate_text, "'fast'");
  EXPECT_TRUE(std::isnan(bad->rate_per_sec));
  EXPECT_EQ(bad->burst_text, "'it''s big'");
  EXPECT_EQ(bad->burst, 0);
  // Numeric text is stored as a number (REAL affinity), so it is no problem.
  db_.exec("UPDATE webhook_subscriber SET rate_per_sec = '2.5', burst = -3 WHERE id = " +
           std::to_string(id));
  const auto numeric = load_subscriber(db_, id);
  EXPECT_FALSE(numeric->rate_text.has_value());
  EXPECT_EQ(numeric->rate_per_sec, 2.5);
  EXPECT_FALSE(numeric->burst_text.has_value());
  EXPECT_EQ(numeric->burst, -3);
}

}  // namespace
}  // namespace surge::storage::sqlite
