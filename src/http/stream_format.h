// Wire formats of streaming responses: chunked transfer framing and server-sent events.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "src/http/responder.h"

namespace abox::http {

// One chunk of a chunked body: "<hex size>\r\n<data>\r\n". Empty data gives "" (an empty chunk
// would end the body).
[[nodiscard]] std::string ChunkFrame(absl::string_view data);
// The last chunk, ending a chunked body (no trailers).
inline constexpr absl::string_view kLastChunk = "0\r\n\r\n";

// "id: ..\nevent: ..\ndata: ..\n\n" (see SseEvent for how fields are cleaned).
[[nodiscard]] std::string FormatSseEvent(const SseEvent& event);
// An SSE comment line that clients ignore; keeps proxies and idle timers from closing.
inline constexpr absl::string_view kSseKeepalive = ":keepalive\n\n";

}  // namespace abox::http
