#include "src/store/event_repo.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/base/status_macros.h"
#include "src/store/column_codec.h"
#include "src/store/retention_counters.h"

namespace abox::store {
namespace {

using nlohmann::json;

// The newest seq ever handed out (AUTOINCREMENT keeps it in sqlite_sequence), 0 if none.
absl::StatusOr<int64_t> ReadLastSeq(Connection& connection) {
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("SELECT coalesce((SELECT seq FROM sqlite_sequence "
                                           "WHERE name = 'events'), 0)"));
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.ColumnInt64(0) : 0;
}

}  // namespace

EventRepo::EventRepo(Database& db, Clock clock, EventRepoOptions options)
    : db_(&db), clock_(std::move(clock)), options_(options) {
  options_.retain = std::max<int64_t>(options_.retain, 1);
}

absl::StatusOr<int64_t> EventRepo::Append(absl::string_view sandbox_id, absl::string_view type,
                                          const json& payload) {
  if (type.empty()) {
    return absl::InvalidArgumentError("event type is empty");
  }
  if (!payload.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("payload of event '", type, "' is not a JSON object"));
  }
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(connection));
  ABOX_ASSIGN_OR_RETURN(Statement insert,
                        connection.Prepare("INSERT INTO events (time, sandbox_id, type, payload) "
                                           "VALUES (?, ?, ?, ?) RETURNING seq"));
  ABOX_RETURN_IF_ERROR(insert.BindInt64(1, ToMillis(clock_())));
  if (sandbox_id.empty()) {
    ABOX_RETURN_IF_ERROR(insert.BindNull(2));
  } else {
    ABOX_RETURN_IF_ERROR(insert.BindText(2, sandbox_id));
  }
  ABOX_RETURN_IF_ERROR(insert.BindText(3, type));
  ABOX_RETURN_IF_ERROR(
      insert.BindText(4, payload.dump(-1, ' ', false, json::error_handler_t::replace)));
  ABOX_ASSIGN_OR_RETURN(bool row, insert.Step());
  if (!row) {
    return absl::InternalError("INSERT INTO events ... RETURNING seq returned no row");
  }
  const int64_t seq = insert.ColumnInt64(0);
  ABOX_RETURN_IF_ERROR(insert.Run());

  // Each scope (a sandbox; the daemon-wide events) keeps its newest `retain`: a guest flooding
  // events (egress refusals) prunes only its own sandbox's, counted in its events_pruned.
  ABOX_RETURN_IF_ERROR(
      KeepNewest(connection, RetainedTable::kEvents, sandbox_id, options_.retain).status());
  if (type == event_type::kRemoved) {
    // Removed sandboxes' events outlive them, but not without end: together they keep the
    // newest `retain` (the one removed now keeps its own until the next removal).
    ABOX_ASSIGN_OR_RETURN(
        Statement gone,
        connection.Prepare("DELETE FROM events WHERE seq IN (SELECT seq FROM events "
                           "WHERE sandbox_id IS NOT NULL AND sandbox_id != ? AND sandbox_id "
                           "NOT IN (SELECT id FROM sandboxes) ORDER BY seq DESC "
                           "LIMIT -1 OFFSET ?) RETURNING seq"));
    ABOX_RETURN_IF_ERROR(gone.BindText(1, sandbox_id));
    ABOX_RETURN_IF_ERROR(gone.BindInt64(2, options_.retain));
    int64_t through = 0;
    for (;;) {
      ABOX_ASSIGN_OR_RETURN(bool row, gone.Step());
      if (!row) {
        break;
      }
      through = std::max(through, gone.ColumnInt64(0));
    }
    if (through > 0) {
      ABOX_RETURN_IF_ERROR(NoteEventsPrunedThrough(connection, sandbox_id, through));
      // Their kept counts follow, so that a late event of one prunes from the true count.
      ABOX_RETURN_IF_ERROR(connection.Execute(
          "UPDATE retention_counters SET events_kept = (SELECT count(*) FROM events e "
          "WHERE e.sandbox_id = retention_counters.sandbox_id) WHERE sandbox_id != '' AND "
          "sandbox_id NOT IN (SELECT id FROM sandboxes)"));
    }
  }
  ABOX_RETURN_IF_ERROR(transaction.Commit());
  return seq;
}

absl::StatusOr<EventBatch> EventRepo::Since(int64_t after_seq, int limit) {
  if (limit < 1) {
    return absl::InvalidArgumentError(absl::StrCat("event limit ", limit, " is below 1"));
  }
  Connection connection = db_->Lock();
  // One snapshot for the events and the bounds that decide `missed`.
  ABOX_ASSIGN_OR_RETURN(Transaction read,
                        Transaction::Begin(connection, Transaction::Mode::kDeferred));
  EventBatch batch;
  ABOX_ASSIGN_OR_RETURN(
      Statement stmt, connection.Prepare("SELECT seq, time, sandbox_id, type, payload FROM events "
                                         "WHERE seq > ? ORDER BY seq LIMIT ?"));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(1, after_seq));
  ABOX_RETURN_IF_ERROR(stmt.BindInt64(2, limit));
  while (true) {
    ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      break;
    }
    Event event;
    event.seq = stmt.ColumnInt64(0);
    event.time = FromMillis(stmt.ColumnInt64(1));
    event.sandbox_id = stmt.ColumnText(2);
    event.type = stmt.ColumnText(3);
    std::string payload = stmt.ColumnText(4);
    event.payload = json::parse(payload, nullptr, false);
    if (event.payload.is_discarded() || !event.payload.is_object()) {
      return absl::DataLossError(absl::StrCat("event ", event.seq,
                                              ": payload is not a JSON object (state database "
                                              "damaged?)"));
    }
    batch.events.push_back(std::move(event));
  }

  // The oldest event kept; with none kept, the next one to come.
  ABOX_ASSIGN_OR_RETURN(Statement oldest, connection.Prepare("SELECT min(seq) FROM events"));
  ABOX_ASSIGN_OR_RETURN(bool row, oldest.Step());
  int64_t first_kept = 0;
  if (row && !oldest.ColumnIsNull(0)) {
    first_kept = oldest.ColumnInt64(0);
  } else {
    ABOX_ASSIGN_OR_RETURN(int64_t last, ReadLastSeq(connection));
    first_kept = last + 1;
  }
  // Retention is per sandbox, so gaps can be anywhere: any event after `after_seq` pruned
  // means missed (and a gap before the oldest kept one, from before the counters existed).
  ABOX_ASSIGN_OR_RETURN(int64_t pruned_through, EventsPrunedThrough(connection));
  batch.missed = after_seq + 1 < first_kept || after_seq < pruned_through;
  ABOX_RETURN_IF_ERROR(read.Commit());
  return batch;
}

absl::StatusOr<int64_t> EventRepo::LastSeq() {
  Connection connection = db_->Lock();
  return ReadLastSeq(connection);
}

absl::StatusOr<int64_t> EventRepo::Count(absl::string_view sandbox_id) {
  Connection connection = db_->Lock();
  ABOX_ASSIGN_OR_RETURN(Statement stmt,
                        connection.Prepare("SELECT count(*) FROM events WHERE sandbox_id IS ?"));
  if (sandbox_id.empty()) {
    ABOX_RETURN_IF_ERROR(stmt.BindNull(1));
  } else {
    ABOX_RETURN_IF_ERROR(stmt.BindText(1, sandbox_id));
  }
  ABOX_ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.ColumnInt64(0) : 0;
}

}  // namespace abox::store
