#pragma once
// Checks on the link models workers report (with a join or a push, or restored from a
// checkpoint) before the allocator plans with them.
#include <cstddef>

#include "message.hpp"

namespace tern::server {

// Why `l` is not a model a link could have, or nullptr. max_message_bytes bounds how many
// packets a token bucket may carry for free (a may be as low as -b per such packet).
const char* invalidLinkModel(const wire::LinkModel& l, size_t max_message_bytes);

// b once the fit separates it from a (its standard error is finite), else 0.
double fittedSecondsPerPacket(const wire::LinkModel& l);

}  // namespace tern::server
