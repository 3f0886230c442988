// In the component's `include` folder: found through the include path only.
#pragma once

#define KW_MAX_FACTOR 1000.0
