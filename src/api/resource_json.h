// Kept so that existing includers (src/daemon/sandbox_manager.h) build unchanged: the API's
// resources now have one codec each. Include the resource's own header instead.
#pragma once

#include "src/api/event.h"
#include "src/api/exec.h"
#include "src/api/sandbox.h"
#include "src/api/wire.h"
