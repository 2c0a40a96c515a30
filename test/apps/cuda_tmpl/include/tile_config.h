// Tile constants shared by the kernels (a project-local header two folders away from the TU).
#pragma once
#ifndef TILE_ROWS
#define TILE_ROWS 4
#endif
