// How the storage thread ends a drain (engine/storage_thread/drain_end.hpp): the order of its
// steps, what waits for the shards, and what a database that refuses writes makes of it.
#include "engine/storage_thread/drain_end.hpp"

#include <vector>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using step = drain_end::step;

TEST(DrainEnd, NothingEndsBeforeEveryShardReturnedItsTokens) {
  drain_end end;
  EXPECT_EQ(end.next(false), step::wait);  // no finish asked yet
  end.finish(2);
  EXPECT_EQ(end.next(false), step::wait);
  end.tokens_returned({{.subscriber_id = 1, .tokens = 2.5}});
  EXPECT_EQ(end.next(false), step::wait);
  end.tokens_returned({});  // a shard with nothing unspent still counts
  EXPECT_EQ(end.next(false), step::write_outcomes);
  EXPECT_FALSE(end.ended());
}

TEST(DrainEnd, WritesEverythingThenCountsReleasesAndReports) {
  drain_end end;
  end.finish(1);
  end.tokens_returned({});
  std::vector<step> steps;
  while (!end.ended()) steps.push_back(end.next(false));
  EXPECT_EQ(steps,
            (std::vector<step>{step::write_outcomes, step::write_quotas, step::give_back_tokens,
                               step::count_remaining, step::release_ownership, step::report}));
  EXPECT_EQ(end.remaining(), -1);  // never counted
}

TEST(DrainEnd, EveryShardsUnspentTokensAreGivenBackTogetherOnce) {
  drain_end end;
  end.finish(2);
  end.tokens_returned({{.subscriber_id = 1, .tokens = 2.5}});
  end.tokens_returned({{.subscriber_id = 2, .tokens = 1}, {.subscriber_id = 3, .tokens = 0.5}});
  const auto tokens = end.tokens_to_give_back();
  ASSERT_EQ(tokens.size(), 3U);
  EXPECT_EQ(tokens[0].subscriber_id, 1);
  EXPECT_EQ(tokens[2].tokens, 0.5);
  // A retried end (outcomes left) does not give them back twice, but gives back what came since.
  EXPECT_TRUE(end.tokens_to_give_back().empty());
  end.tokens_returned({{.subscriber_id = 4, .tokens = 1}});
  const auto later = end.tokens_to_give_back();
  ASSERT_EQ(later.size(), 1U);
  EXPECT_EQ(later[0].subscriber_id, 4);
}

TEST(DrainEnd, TheReportSaysTheRowsCounted) {
  drain_end end;
  end.finish(0);
  while (end.next(false) != step::count_remaining) {
  }
  end.remaining_counted(12);
  EXPECT_EQ(end.next(false), step::release_ownership);
  EXPECT_EQ(end.next(false), step::report);
  EXPECT_EQ(end.remaining(), 12);
}

TEST(DrainEnd, OutcomesLeftAreRetriedFromTheStartUntilAbandoned) {
  drain_end end;
  end.finish(0);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(end.next(true), step::write_outcomes);
    EXPECT_EQ(end.next(true), step::write_quotas);
    EXPECT_EQ(end.next(true), step::give_back_tokens);
    EXPECT_EQ(end.next(true), step::retry_later);
    EXPECT_FALSE(end.ended());
  }
  end.abandon();
  EXPECT_EQ(end.next(true), step::write_outcomes);
  EXPECT_EQ(end.next(true), step::write_quotas);
  EXPECT_EQ(end.next(true), step::give_back_tokens);
  EXPECT_EQ(end.next(true), step::give_up);
  EXPECT_TRUE(end.ended());
}

TEST(DrainEnd, AnAbandonedEndWithEverythingWrittenStillCountsAndReports) {
  drain_end end;
  end.finish(0);
  end.abandon();
  EXPECT_EQ(end.next(false), step::write_outcomes);
  EXPECT_EQ(end.next(false), step::write_quotas);
  EXPECT_EQ(end.next(false), step::give_back_tokens);
  EXPECT_EQ(end.next(false), step::count_remaining);
}

}  // namespace
}  // namespace surge::engine
