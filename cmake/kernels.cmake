# Kernel sources per ISA. Each ISA is compiled with its own flags; the dispatcher picks one
# table at run time. Only the scalar table exists so far.
set(MH_KERNEL_SOURCES
  src/kernels/scalar/convert_scalar.c
  src/kernels/scalar/pack_kv_scalar.c
  src/kernels/scalar/f32_qk_scalar.c
  src/kernels/scalar/f32_softmax_scalar.c
  src/kernels/scalar/f32_pv_scalar.c
  src/kernels/scalar/f32_gemm_scalar.c
  src/kernels/scalar/table_scalar.c)
