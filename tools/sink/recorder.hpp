#pragma once
// Every request the sink saw: a CSV line in the record file and in-memory counters for
// GET /_sink/stats.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "tools/sink/verdict.hpp"

namespace surge::sink {

struct request_record {
  double arrival = 0;      // Unix seconds
  std::string subscriber;  // the last path segment as sent
  // X-VVV-Delivery-Id, empty when absent; for a batch, X-VVV-Delivery-Ids with spaces for commas
  std::string delivery_id;
  std::string attempt;  // X-VVV-Attempt, empty when absent
  verdict result = verdict::missing;
  unsigned status_sent = 0;  // 0: nothing was sent (hang, reset)
  std::string event_type;    // X-VVV-Event
  std::uint64_t connection_id = 0;
  // Protocol slips that do not change the verdict but a drainer must not make.
  bool bad_content_type = false;
  bool missing_delivery_headers = false;
  bool stale_timestamp = false;
  std::string sni;          // the TLS server name the client sent, empty for none or plain
  std::string body_sha256;  // lowercase hex of the body received, empty when not read whole
  // Events the request carried by its X-VVV-Batch-Size header; 0 for a request that is not a
  // batch. bad_batch: the size, the id list and the body's array disagree or do not parse.
  std::uint64_t batch_size = 0;
  bool bad_batch = false;
};

// One CSV line without the newline: arrival (6 decimals), subscriber_id, delivery_id, attempt,
// verdict, status_sent, event_type, connection_id, sni, body_sha256, batch_size. Fields are
// quoted only when they need it.
std::string format_record(const request_record& record);
// The columns of format_record's lines, in order (`sink --help`, docs/cli.md).
inline constexpr const char* record_columns =
    "arrival,subscriber_id,delivery_id,attempt,verdict,status_sent,event_type,connection_id,sni,"
    "body_sha256,batch_size";

class recorder {
 public:
  // An empty path keeps counters only. The file is truncated: one run, one record.
  explicit recorder(const std::string& path,
                    std::chrono::milliseconds flush_interval = std::chrono::milliseconds(100));
  ~recorder();
  recorder(const recorder&) = delete;
  recorder& operator=(const recorder&) = delete;

  void add(const request_record& record);
  void note_connection();
  // Bytes written after the header by streamed answers (body_bytes, announce_length,
  // endless_chunked, chunk framing included): how much a client let the sink send before it
  // closed.
  void note_streamed(std::uint64_t bytes);

  // {"requests":N,"events":N,"connections":N,"streamed_body_bytes":N,"by_verdict":{..},"by_status":{..},
  //  "problems":{..},"by_subscriber":{"3":{"requests":..,"ok":..,..,"by_status":{..}}}}
  std::string stats_json() const;
  std::uint64_t requests() const;

  // Writes buffered lines to the file; also runs on a timer and when closing.
  void flush();
  // Stops the flush thread, flushes and closes the file. Idempotent.
  void close();

 private:
  struct counters {
    std::uint64_t requests = 0;
    std::map<verdict, std::uint64_t> by_verdict;
    std::map<unsigned, std::uint64_t> by_status;
  };

  void flush_locked();
  void flush_loop(std::chrono::milliseconds interval);

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool closing_ = false;
  std::FILE* file_ = nullptr;
  std::string buffer_;
  counters total_;
  std::uint64_t connections_ = 0;
  std::uint64_t streamed_body_bytes_ = 0;
  std::uint64_t bad_content_type_ = 0, missing_delivery_headers_ = 0, stale_timestamp_ = 0;
  std::uint64_t bad_batch_ = 0;
  std::uint64_t events_ = 0;  // requests plus the extra events batches carried
  std::map<std::string, counters> by_subscriber_;
  std::thread flusher_;
};

}  // namespace surge::sink
