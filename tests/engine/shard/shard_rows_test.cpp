// The rows a shard holds, on their own: the row budget and payload memory they count against,
// the outcomes they leave with, and the batches those go to the storage thread in.
#include "engine/shard/shard_rows.hpp"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "engine/subscriber_settings.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;

class ShardRows : public ::testing::Test {
 protected:
  ShardRows() {
    config_.outcome_flush_rows = 3;
    storage::subscriber_row row;
    row.id = 7;
    row.url = "http://partner.test/hook";
    row.secret = "secret";
    auto sub = std::make_unique<subscriber_state>(
        row, derive_settings(row, config_), std::chrono::steady_clock::time_point{}, 1e9, config_);
    sub_ = sub.get();
    subscribers_.emplace(7, std::move(sub));
  }

  // A claim's answer of rows `first` to `last` of subscriber 7.
  void answer(shard_rows& rows, int first, int last, bool stopping = false) {
    std::vector<storage::claimed_row> claimed;
    for (int id = first; id <= last; ++id) claimed.push_back(row(id));
    rows.take_answer(claimed, subscribers_, stopping, joined_);
  }

  static storage::claimed_row row(std::int64_t id) {
    storage::claimed_row r;
    r.id = id;
    r.subscriber_id = 7;
    r.payload = std::string(100, 'x');
    return r;
  }

  static storage::outcome outcome_of(storage::outcome_kind kind) {
    storage::outcome out;
    out.kind = kind;
    return out;
  }

  std::vector<storage::outcome_kind> kinds() const {
    std::vector<storage::outcome_kind> out;
    for (const auto& write : writes_) {
      for (const auto& outcome : write.outcomes) out.push_back(outcome.kind);
    }
    return out;
  }

  scheduler_config config_;
  drain_counters counters_;
  std::vector<outcome_write> writes_;
  subscriber_map subscribers_;
  subscriber_state* sub_ = nullptr;
  std::vector<subscriber_state*> joined_;
};

TEST_F(ShardRows, OutcomesGoInBatchesOfTheFlushSizeAndTheRestAtAFlush) {
  shard_rows rows(config_, 1, counters_, writes_);
  answer(rows, 1, 4);
  EXPECT_EQ(rows.buffered(), 4);
  EXPECT_EQ(counters_.buffered.load(), 4);
  rows.release_ready(*sub_);
  ASSERT_EQ(writes_.size(), 1u);  // three of four: a full batch
  EXPECT_EQ(writes_[0].outcomes.size(), 3u);
  rows.deactivate(7);
  rows.flush();
  ASSERT_EQ(writes_.size(), 2u);
  EXPECT_EQ(writes_[1].outcomes.size(), 1u);
  EXPECT_EQ(writes_[1].deactivate, std::vector<std::int64_t>{7});
  EXPECT_EQ(rows.buffered(), 0);
  EXPECT_EQ(counters_.released.load(), 4);
  EXPECT_TRUE(sub_->ready.empty());
  rows.flush();  // nothing left: no empty write
  EXPECT_EQ(writes_.size(), 2u);
}

TEST_F(ShardRows, DeadReleasedAndRescheduledRowsCountTheirKindAndFreeTheirMemory) {
  shard_rows rows(config_, 1, counters_, writes_);
  answer(rows, 1, 3);
  EXPECT_EQ(sub_->payload.held_bytes, 300);
  rows.dead_letter_front(*sub_, "payload too large", 1e9);
  rows.release_front(*sub_);
  rows.reschedule_ready(*sub_, 1e9 + 30, "subscriber paused by Retry-After");
  rows.flush();
  EXPECT_EQ(kinds(), (std::vector<storage::outcome_kind>{storage::outcome_kind::dead,
                                                         storage::outcome_kind::release,
                                                         storage::outcome_kind::retry}));
  EXPECT_EQ(writes_[0].outcomes[2].next_attempt_at, 1e9 + 30);
  EXPECT_EQ(counters_.dead.load(), 1);
  EXPECT_EQ(counters_.released.load(), 1);
  EXPECT_EQ(sub_->payload.held_bytes, 0);
  EXPECT_EQ(rows.buffered(), 0);
}

TEST_F(ShardRows, ASettledOutcomeIsCountedByItsKind) {
  shard_rows rows(config_, 1, counters_, writes_);
  rows.settled(outcome_of(storage::outcome_kind::done));
  rows.settled(outcome_of(storage::outcome_kind::retry));
  EXPECT_EQ(counters_.delivered.load(), 1);
  EXPECT_EQ(counters_.retried.load(), 1);
  rows.flush();
  EXPECT_EQ(kinds(), (std::vector<storage::outcome_kind>{storage::outcome_kind::done,
                                                         storage::outcome_kind::retry}));
}

TEST_F(ShardRows, EveryOutcomeCountsInTransitFromItsSettlingUntilTheStorageThreadTakesItIn) {
  // The storage thread takes the shards to be idle only with nothing buffered, in flight or in
  // transit: an outcome a shard holds for its flush must count, whatever it is.
  shard_rows rows(config_, 1, counters_, writes_);
  answer(rows, 1, 5);
  rows.dead_letter_front(*sub_, "payload too large", 1e9);
  rows.release_front(*sub_);
  rows.reschedule_ready(*sub_, 1e9 + 30, "subscriber paused by Retry-After");
  rows.settled(outcome_of(storage::outcome_kind::done));
  EXPECT_EQ(counters_.buffered.load(), 0);
  EXPECT_EQ(counters_.outcomes_in_transit.load(), 6);
  rows.flush();
  EXPECT_EQ(kinds().size(), 6u);
  EXPECT_EQ(counters_.outcomes_in_transit.load(), 6);  // until the storage thread takes them
}

TEST_F(ShardRows, AClaimsRowsJoinTheirSubscriberAndThoseNobodyHereCanSendGoBackUncounted) {
  shard_rows rows(config_, 1, counters_, writes_);
  answer(rows, 1, 2);
  EXPECT_EQ(joined_, (std::vector<subscriber_state*>{sub_, sub_}));
  EXPECT_EQ(sub_->ready.size(), 2u);
  auto stranger = row(3);
  stranger.subscriber_id = 8;  // not this shard's
  std::vector<storage::claimed_row> claimed{stranger};
  rows.take_answer(claimed, subscribers_, false, joined_);
  answer(rows, 4, 4, true);  // the shard stops: nothing more joins
  rows.flush();
  EXPECT_EQ(kinds(), (std::vector<storage::outcome_kind>{storage::outcome_kind::release,
                                                         storage::outcome_kind::release}));
  EXPECT_EQ(rows.buffered(), 2);
  EXPECT_EQ(joined_.size(), 2u);
  EXPECT_EQ(counters_.claimed.load(), 4);
  EXPECT_EQ(counters_.released.load(), 0);  // never buffered here: not a release of this drain
}

}  // namespace
}  // namespace surge::engine
