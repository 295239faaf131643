#include "third_party/cuda/lazy/lazy_library.h"

#include <cufft.h>
#include <cusparse.h>
#include <nccl.h>

#include <string>

#include "gtest/gtest.h"

namespace tessera::cuda_lazy {
namespace {

TEST(LazyLibrary, EveryForwardedFunctionExistsInItsLibrary) {
  ASSERT_EQ(Cufft().error(), "");
  ASSERT_EQ(Cusparse().error(), "");
  ASSERT_EQ(Nccl().error(), "");
  for (const char* f : {"cufftCreate", "cufftDestroy", "cufftExecC2C", "cufftExecZ2Z", "cufftExecC2R", "cufftExecR2C",
                        "cufftMakePlanMany", "cufftMakePlanMany64", "cufftSetAutoAllocation", "cufftSetStream",
                        "cufftSetWorkArea"}) {
    EXPECT_NE(Cufft().Symbol(f), nullptr) << f;
  }
  for (const char* f : {"cusparseCreate", "cusparseDestroy", "cusparseSetStream", "cusparseGetErrorString",
                        "cusparseCreateCsr", "cusparseCreateConstCsr", "cusparseCreateDnMat", "cusparseCreateConstDnMat",
                        "cusparseCreateDnVec", "cusparseDestroyDnMat", "cusparseDestroyDnVec", "cusparseDestroySpMat",
                        "cusparseDnVecSetValues", "cusparseSpMM_bufferSize", "cusparseSpMM",
                        "cusparseSpMV_bufferSize", "cusparseSpMV_preprocess", "cusparseSpMV"}) {
    EXPECT_NE(Cusparse().Symbol(f), nullptr) << f;
  }
  for (const char* f : {"ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy", "ncclGetErrorString",
                        "ncclGroupStart", "ncclGroupEnd", "ncclAllReduce", "ncclSend", "ncclRecv"}) {
    EXPECT_NE(Nccl().Symbol(f), nullptr) << f;
  }
}

TEST(LazyLibrary, CallsReachTheRealLibraries) {
  // The stand-ins' own answers when a library is missing are these strings;
  // the real libraries describe the codes in their own words.
  EXPECT_NE(std::string(cusparseGetErrorString(CUSPARSE_STATUS_SUCCESS)), "cuSPARSE library not loaded");
  EXPECT_NE(std::string(ncclGetErrorString(ncclSuccess)), "NCCL library not loaded");
  EXPECT_NE(std::string(ncclGetErrorString(ncclInvalidArgument)), std::string(ncclGetErrorString(ncclSuccess)));
  // cuFFT answers argument errors before it needs a device.
  EXPECT_EQ(cufftCreate(nullptr), CUFFT_INVALID_VALUE);
}

TEST(LazyLibrary, AMissingLibrarySaysWhy) {
  const LazyLibrary missing({"libtessera-no-such-library.so.0"});
  EXPECT_NE(missing.error().find("libtessera-no-such-library.so.0"), std::string::npos) << missing.error();
  EXPECT_EQ(missing.Symbol("anything"), nullptr);
}

}  // namespace
}  // namespace tessera::cuda_lazy
