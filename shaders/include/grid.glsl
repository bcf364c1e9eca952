// Grids larger than the device's x limit are folded into y (dispatch.cpp,
// fold_grid); this rebuilds the linear workgroup index.
#ifndef VKATTN_GRID_GLSL
#define VKATTN_GRID_GLSL
uint vka_linear_workgroup(uint grid_x) { return gl_WorkGroupID.y * grid_x + gl_WorkGroupID.x; }
#endif
