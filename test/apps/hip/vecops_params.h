#pragma once
// A by-value struct parameter: its kernarg layout must survive the reproducer rebuild.
struct ScaleParams { int n; float factor; float bias; };
