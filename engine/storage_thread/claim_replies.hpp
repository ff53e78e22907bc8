#pragma once
// One claim's answer split by the shards that asked: each gets its own demand back, with the
// rows, token grants and more-due of its subscribers (shard_of). Pure.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/storage_thread/storage_actions.hpp"
#include "storage/claims.hpp"

namespace surge::engine {

// `asked`: each asking shard's index with its demand, as it came.
std::vector<storage_do::answer_shard> claim_replies(
    std::vector<std::pair<int, std::vector<storage::subscriber_demand>>> asked,
    std::vector<storage::claimed_row> rows, std::vector<storage::token_grant> granted,
    std::vector<std::int64_t> more_due, std::size_t shard_count);

}  // namespace surge::engine
