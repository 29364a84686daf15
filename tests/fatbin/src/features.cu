#include <mma.h>
#include <cuda_pipeline.h>
#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
using namespace nvcuda;
__global__ void wm(half* a, half* b, float* c){
  wmma::fragment<wmma::matrix_a,16,16,16,half,wmma::row_major> fa; wmma::fragment<wmma::matrix_b,16,16,16,half,wmma::col_major> fb;
  wmma::fragment<wmma::accumulator,16,16,16,float> fc; wmma::fill_fragment(fc,0.f);
  wmma::load_matrix_sync(fa,a,16); wmma::load_matrix_sync(fb,b,16); wmma::mma_sync(fc,fa,fb,fc); wmma::store_matrix_sync(c,fc,16,wmma::mem_row_major);
}
__global__ void ca(float* g){ __shared__ float s[64]; __pipeline_memcpy_async(&s[threadIdx.x], &g[threadIdx.x], 4); __pipeline_commit(); __pipeline_wait_prior(0); g[threadIdx.x]=s[63-threadIdx.x]+__reduce_add_sync(0xffffffff,(unsigned)threadIdx.x); }
__global__ void tx(cudaTextureObject_t t, float* o){ o[threadIdx.x]=tex1Dfetch<float>(t,threadIdx.x); printf("hi %d\n", threadIdx.x); }
__global__ void __cluster_dims__(2,1,1) cl(int* o){ cg::cluster_group c = cg::this_cluster(); o[0]=c.block_rank(); c.sync(); asm volatile("griddepcontrol.wait;"); 
  unsigned e; asm volatile("{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 %0,1,0,p; }" : "=r"(e)); o[1]=e; }
