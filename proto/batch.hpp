#pragma once
// Batch POSTs: several queue rows in one request whose body is a JSON array
// of their payloads, bytes unchanged. Pure: the engine builds requests with it, the sink and the
// docs' receivers take them apart with the same rules.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace surge::proto {

// The batch limits: small enough that retrying a whole batch is acceptable.
inline constexpr std::int64_t max_batch_rows = 500;
inline constexpr std::int64_t max_batch_bytes = 1'048'576;
inline constexpr double max_batch_linger_seconds = 60;

// Whether `payload` is exactly one JSON value, so that it can be an element of the array. A
// payload that is not is sent alone, as it is.
bool is_json_value(std::string_view payload);

// The body of a batch: '[' payload ',' payload ... ']'.
std::string batch_body(std::span<const std::string_view> payloads);
// Its size for `count` payloads of `payload_bytes` in total, without building it.
std::int64_t batch_body_bytes(std::int64_t payload_bytes, std::int64_t count);

// The X-VVV-Delivery-Ids value: ids in body order, comma-separated, no spaces.
std::string delivery_ids_header(std::span<const std::int64_t> ids);
// Its inverse; nullopt unless every entry is a positive decimal integer.
std::optional<std::vector<std::int64_t>> parse_delivery_ids(std::string_view header);

// The Standard Webhooks id of a batch: "msg_batch_" and 16 hex digits of SHA-256 over the sorted
// ids, so a retry of the same rows carries the same id and a different set never does.
std::string batch_message_id(std::span<const std::int64_t> ids);

// A partner that answers 413 (Payload Too Large) to a batch takes smaller ones: the rows go
// again at once, in batches of at most the size returned (half, down to single rows), without
// using up an attempt. nullopt when the answer to a batch of `rows` is judged like any other.
std::optional<std::int64_t> batch_rows_after(int status, std::int64_t rows);

// How many events a batch body holds; nullopt when it is not a JSON array.
std::optional<std::size_t> batch_event_count(std::string_view body);

}  // namespace surge::proto
