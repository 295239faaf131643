// Test-only: a LinearOperator from a dense row-major matrix on the CPU, with
// interleaved ordered subsets, and a small 2-D parallel-beam system matrix
// to make it a tomographic problem.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_DENSE_OPERATOR_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_DENSE_OPERATOR_H_

#include <cstdint>
#include <vector>

#include "common/device.h"
#include "kernels/reconstruction/linear_operator.h"

namespace tessera {
namespace recon {
namespace testing {

class DenseOperator : public LinearOperator {
 public:
  // `matrix`: (num_views * per_view) x cols, row-major; rows of view v are
  // v * per_view .. (v + 1) * per_view - 1.
  DenseOperator(std::vector<float> matrix, int64_t num_views, int64_t per_view, int64_t cols, int num_subsets);

  const Stream& stream() const override { return stream_; }
  int64_t domain_size() const override { return cols_; }
  int64_t num_views() const override { return num_views_; }
  int64_t elements_per_view() const override { return per_view_; }
  int num_subsets() const override { return num_subsets_; }
  absl::Status Forward(const float* x, float* y, int subset) override;
  absl::Status Back(const float* y, float* x, int subset) override;

  const std::vector<float>& matrix() const { return a_; }
  int forward_calls() const { return forward_calls_; }
  int back_calls() const { return back_calls_; }

 private:
  Stream stream_;
  std::vector<float> a_;
  int64_t num_views_, per_view_, cols_;
  int num_subsets_;
  int forward_calls_ = 0, back_calls_ = 0;
};

// The system matrix of an n x n image of 1 mm pixels centred on the origin,
// seen by `views` parallel views over [0, pi) of `cols` detector bins of
// `width` mm: each ray is sampled every 0.02 mm and each sample adds its
// length to the pixel it falls in. Row-major, views x cols rows, n*n columns.
std::vector<float> ParallelBeamMatrix(int64_t n, int64_t views, int64_t cols, double width);

}  // namespace testing
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_DENSE_OPERATOR_H_
