#pragma once
#define ROWS_GAIN 1.0f
