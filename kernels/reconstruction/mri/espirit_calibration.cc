#include "kernels/reconstruction/mri/espirit_calibration.h"

#include <algorithm>
#include <cstddef>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status.h"

// LAPACK (Fortran ABI, gfortran's hidden string lengths last).
extern "C" void zheevd_(const char* jobz, const char* uplo, const int* n, std::complex<double>* a, const int* lda,
                        double* w, std::complex<double>* work, const int* lwork, double* rwork, const int* lrwork,
                        int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
extern "C" void zheevr_(const char* jobz, const char* range, const char* uplo, const int* n, std::complex<double>* a,
                        const int* lda, const double* vl, const double* vu, const int* il, const int* iu,
                        const double* abstol, int* m, double* w, std::complex<double>* z, const int* ldz, int* isuppz,
                        std::complex<double>* work, const int* lwork, double* rwork, const int* lrwork, int* iwork,
                        const int* liwork, int* info, size_t jobz_len, size_t range_len, size_t uplo_len);

namespace tessera {
namespace recon {
namespace mri {
namespace espirit_internal {

using Complex = std::complex<float>;
using Complex64 = std::complex<double>;

absl::Status CheckOptions(const EspiritOptions& o) {
  if (o.kernel_size < 1) return absl::InvalidArgumentError(absl::StrCat("espirit: kernel size ", o.kernel_size, " < 1"));
  if (!(o.threshold > 0 && o.threshold < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: threshold ", o.threshold, " outside (0, 1)"));
  }
  if (!(o.crop >= 0 && o.crop < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: crop ", o.crop, " outside [0, 1)"));
  }
  if (o.power_iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("espirit: power iterations ", o.power_iterations, " < 1"));
  }
  return absl::OkStatus();
}

absl::Status HermitianEigen(int n, std::vector<Complex64>* a, std::vector<double>* values) {
  values->assign(n, 0);
  int info = 0, lwork = -1, lrwork = -1, liwork = -1;
  Complex64 work_size;
  double rwork_size = 0;
  int iwork_size = 0;
  zheevd_("V", "U", &n, a->data(), &n, values->data(), &work_size, &lwork, &rwork_size, &lrwork, &iwork_size, &liwork,
          &info, 1, 1);
  if (info != 0) return absl::InternalError(absl::StrCat("zheevd workspace query failed (info ", info, ")"));
  lwork = static_cast<int>(work_size.real());
  lrwork = static_cast<int>(rwork_size);
  liwork = iwork_size;
  std::vector<Complex64> work(std::max(1, lwork));
  std::vector<double> rwork(std::max(1, lrwork));
  std::vector<int> iwork(std::max(1, liwork));
  zheevd_("V", "U", &n, a->data(), &n, values->data(), work.data(), &lwork, rwork.data(), &lrwork, iwork.data(),
          &liwork, &info, 1, 1);
  if (info != 0) return absl::InternalError(absl::StrCat("zheevd did not converge (info ", info, ")"));
  return absl::OkStatus();
}

absl::Status HermitianEigenAbove(int n, std::vector<Complex64>* a, double lower, std::vector<double>* values,
                                 std::vector<Complex64>* vectors) {
  values->assign(n, 0);
  vectors->assign(static_cast<size_t>(n) * n, 0);
  std::vector<int> support(2 * static_cast<size_t>(std::max(n, 1)));
  const double upper = std::numeric_limits<double>::max();
  const int il = 0, iu = 0;
  const double abstol = 0;
  int found = 0, info = 0, lwork = -1, lrwork = -1, liwork = -1;
  Complex64 work_size;
  double rwork_size = 0;
  int iwork_size = 0;
  zheevr_("V", "V", "U", &n, a->data(), &n, &lower, &upper, &il, &iu, &abstol, &found, values->data(),
          vectors->data(), &n, support.data(), &work_size, &lwork, &rwork_size, &lrwork, &iwork_size, &liwork, &info, 1,
          1, 1);
  if (info != 0) return absl::InternalError(absl::StrCat("zheevr workspace query failed (info ", info, ")"));
  lwork = static_cast<int>(work_size.real());
  lrwork = static_cast<int>(rwork_size);
  liwork = iwork_size;
  std::vector<Complex64> work(std::max(1, lwork));
  std::vector<double> rwork(std::max(1, lrwork));
  std::vector<int> iwork(std::max(1, liwork));
  zheevr_("V", "V", "U", &n, a->data(), &n, &lower, &upper, &il, &iu, &abstol, &found, values->data(),
          vectors->data(), &n, support.data(), work.data(), &lwork, rwork.data(), &lrwork, iwork.data(), &liwork, &info,
          1, 1, 1);
  if (info != 0) return absl::InternalError(absl::StrCat("zheevr did not converge (info ", info, ")"));
  values->resize(found);
  vectors->resize(static_cast<size_t>(found) * n);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Complex64>> PrincipalCoilVector(const std::vector<Complex>& calibration, int64_t points,
                                                           int coils) {
  std::vector<Complex64> cov(static_cast<size_t>(coils) * coils, 0);
  for (int c = 0; c < coils; ++c) {
    for (int d = c; d < coils; ++d) {  // upper: row c, column d
      Complex64 s = 0;
      const Complex* yc = calibration.data() + c * points;
      const Complex* yd = calibration.data() + d * points;
      for (int64_t i = 0; i < points; ++i) s += Complex64(yc[i]) * std::conj(Complex64(yd[i]));
      cov[c + static_cast<size_t>(d) * coils] = s;
    }
  }
  std::vector<double> values;
  TESSERA_RETURN_IF_ERROR(HermitianEigen(coils, &cov, &values));
  return std::vector<Complex64>(cov.end() - coils, cov.end());  // the last column: largest eigenvalue
}

}  // namespace espirit_internal
}  // namespace mri
}  // namespace recon
}  // namespace tessera
