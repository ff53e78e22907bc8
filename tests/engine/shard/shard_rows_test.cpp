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
    sub_ = std::make_unique<subscriber_state>(
        row, derive_settings(row, config_), std::chrono::steady_clock::time_point{}, 1e9, config_);
  }

  static storage::claimed_row row(std::int64_t id) {
    storage::claimed_row r;
    r.id = id;
    r.subscriber_id = 7;
    r.payload = std::string(100, 'x');
    return r;
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
  std::unique_ptr<subscriber_state> sub_;
};

TEST_F(ShardRows, OutcomesGoInBatchesOfTheFlushSizeAndTheRestAtAFlush) {
  shard_rows rows(config_, 1, counters_, writes_);
  for (int id = 1; id <= 4; ++id) rows.take_in(*sub_, row(id));
  rows.answered(4, 400);
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
  for (int id = 1; id <= 3; ++id) rows.take_in(*sub_, row(id));
  rows.answered(3, 300);
  EXPECT_EQ(sub_->payload.held_bytes, 300);
  auto front = std::move(sub_->ready.front());
  sub_->ready.pop_front();
  rows.dead_letter(*sub_, std::move(front), "payload too large", 1e9);
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
  storage::outcome done;
  done.kind = storage::outcome_kind::done;
  rows.settled(done);
  storage::outcome retry;
  retry.kind = storage::outcome_kind::retry;
  rows.settled(retry);
  EXPECT_EQ(counters_.delivered.load(), 1);
  EXPECT_EQ(counters_.retried.load(), 1);
  rows.flush();
  EXPECT_EQ(kinds(), (std::vector<storage::outcome_kind>{storage::outcome_kind::done,
                                                         storage::outcome_kind::retry}));
}

TEST_F(ShardRows, ARowNobodyHereCanSendGoesBackUncounted) {
  shard_rows rows(config_, 1, counters_, writes_);
  rows.refuse(row(1));
  rows.flush();
  EXPECT_EQ(kinds(), std::vector<storage::outcome_kind>{storage::outcome_kind::release});
  EXPECT_EQ(rows.buffered(), 0);
  EXPECT_EQ(counters_.released.load(), 0);  // never buffered here: not a release of this drain
}

}  // namespace
}  // namespace surge::engine
