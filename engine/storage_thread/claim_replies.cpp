#include "engine/storage_thread/claim_replies.hpp"

#include <algorithm>

#include "engine/handoff.hpp"

namespace surge::engine {

std::vector<storage_do::answer_shard> claim_replies(
    std::vector<std::pair<int, std::vector<storage::subscriber_demand>>> asked,
    std::vector<storage::claimed_row> rows, std::vector<storage::token_grant> granted,
    std::vector<std::int64_t> more_due, std::size_t shard_count) {
  shard_count = std::max<std::size_t>(shard_count, 1);
  std::vector<claim_reply> replies(shard_count);
  for (auto& [shard, demand] : asked) {
    replies[static_cast<std::size_t>(shard)].asked = std::move(demand);
  }
  for (auto& row : rows) {
    replies[shard_of(row.subscriber_id, shard_count)].rows.push_back(std::move(row));
  }
  for (auto& grant : granted) {
    replies[shard_of(grant.subscriber_id, shard_count)].granted.push_back(std::move(grant));
  }
  for (const auto id : more_due) replies[shard_of(id, shard_count)].more_due.push_back(id);
  std::vector<storage_do::answer_shard> answers;
  answers.reserve(asked.size());
  for (const auto& [shard, demand] : asked) {
    answers.push_back({shard, std::move(replies[static_cast<std::size_t>(shard)])});
  }
  return answers;
}

}  // namespace surge::engine
