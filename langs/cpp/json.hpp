// kiln: checkers written for Codebattle include "../json.hpp" from check/. The JSON library is
// Debian's nlohmann-json3-dev (on the compiler's include path); this file only forwards to it.
#pragma once
#include <nlohmann/json.hpp>
