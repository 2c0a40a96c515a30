// Host entry points of the kernels library (defined in src/*.cu, called by main.cu).
#pragma once
void umb_gemm_64(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void umb_gemm_128(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
void umb_row_sum(const float* x, float* y, int rows, int cols);
void umb_scale(float* y, const float* x, float a, int n);
void umb_softmax(float* y, const float* x, int rows, int cols);
int umb_gemm_sweep_count();
void umb_gemm_sweep(int shape, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C);
