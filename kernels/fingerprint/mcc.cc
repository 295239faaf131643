// MCC argument checks, backend dispatch and the gallery layout.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/mcc_impl.h"

namespace tessera {
namespace fingerprint {

absl::Status ValidateMccInput(const std::vector<MinutiaPoint>& minutiae, const MccParams& p) {
  if (!(p.radius > 0 && p.radius < 1e4) || !(p.sigma_s > 0) || !(p.sigma_d > 0) || !(p.mu_psi > 0) ||
      !(p.omega >= 0) || !(p.min_valid_cells >= 0 && p.min_valid_cells <= 1) || p.min_neighbours < 0) {
    return absl::InvalidArgumentError("mcc: invalid parameters");
  }
  if (minutiae.size() > kMccMaxMinutiae) {
    return absl::InvalidArgumentError(
        absl::StrCat("mcc: ", minutiae.size(), " minutiae (at most ", kMccMaxMinutiae, " per template)"));
  }
  for (size_t i = 0; i < minutiae.size(); ++i) {
    const MinutiaPoint& m = minutiae[i];
    if (!std::isfinite(m.x) || !std::isfinite(m.y) || !std::isfinite(m.theta) || std::fabs(m.x) > 1e6f ||
        std::fabs(m.y) > 1e6f || std::fabs(m.theta) > 1e3f) {
      return absl::InvalidArgumentError(absl::StrCat("mcc: minutia ", i, " has a non-finite or huge value"));
    }
  }
  return absl::OkStatus();
}

int MccCellsInCircle(const MccParams& params) {
  mcc_internal::MccConstants c;
  c.delta_s = 2.0 * params.radius / kMccNs;
  c.radius2 = params.radius * params.radius;
  int n = 0;
  for (int j = 0; j < kMccNs; ++j)
    for (int i = 0; i < kMccNs; ++i) n += mcc_internal::CellInCircle(i, j, c);
  return n;
}

void MccCircleMask(const MccParams& params, uint64_t mask[kMccMaskWords]) {
  mcc_internal::MccConstants c;
  c.delta_s = 2.0 * params.radius / kMccNs;
  c.radius2 = params.radius * params.radius;
  std::memset(mask, 0, sizeof(uint64_t) * kMccMaskWords);
  for (int j = 0; j < kMccNs; ++j)
    for (int i = 0; i < kMccNs; ++i)
      if (mcc_internal::CellInCircle(i, j, c)) mask[(i + kMccNs * j) / 64] |= uint64_t{1} << ((i + kMccNs * j) % 64);
}

absl::StatusOr<std::vector<MccTemplate>> BuildMccTemplates(const Stream& stream,
                                                           const std::vector<std::vector<MinutiaPoint>>& templates,
                                                           const MccParams& params) {
  for (size_t t = 0; t < templates.size(); ++t) {
    absl::Status s = ValidateMccInput(templates[t], params);
    if (!s.ok()) return Annotate(s, absl::StrCat("template ", t));
  }
  if (stream.backend() == Backend::kCpu) {
    std::vector<MccTemplate> out;
    out.reserve(templates.size());
    for (const auto& t : templates) out.push_back(cpu::BuildMccTemplate(t, params));
    return out;
  }
#if TESSERA_WITH_CUDA
  return cuda::BuildMccTemplates(stream, templates, params);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("mcc: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

// --- MccGallery -------------------------------------------------------------

int MccGallery::max_template_size() const {
  int m = 0;
  for (int t = 0; t < num_templates(); ++t) m = std::max(m, template_size(t));
  return m;
}

void MccGallery::Reserve(size_t templates, size_t cylinders) {
  start.reserve(templates + 1);
  bits.reserve(cylinders * kMccBitWords);
  mask.reserve(cylinders * kMccMaskWords);
  x.reserve(cylinders);
  y.reserve(cylinders);
  theta.reserve(cylinders);
  bit_count.reserve(cylinders);
  full_mask.reserve(cylinders);
}

void MccGallery::Append(const MccTemplate& t, const MccParams& params) {
  uint64_t circle[kMccMaskWords];
  MccCircleMask(params, circle);
  const int n = static_cast<int>(t.cylinders.size());
  const size_t s = static_cast<size_t>(start.back());
  bits.resize((s + n) * kMccBitWords);
  mask.resize((s + n) * kMccMaskWords);
  for (int j = 0; j < n; ++j) {
    const MccCylinder& c = t.cylinders[j];
    int count = 0;
    bool full = true;
    for (int w = 0; w < kMccBitWords; ++w) {
      bits[s * kMccBitWords + static_cast<size_t>(w) * n + j] = c.bits[w];
      count += __builtin_popcountll(c.bits[w]);
    }
    for (int w = 0; w < kMccMaskWords; ++w) {
      mask[s * kMccMaskWords + static_cast<size_t>(w) * n + j] = c.mask[w];
      full = full && c.mask[w] == circle[w];
    }
    x.push_back(c.x);
    y.push_back(c.y);
    theta.push_back(c.theta);
    bit_count.push_back(static_cast<uint16_t>(count));
    full_mask.push_back(full ? 1 : 0);
  }
  start.push_back(static_cast<int32_t>(s + n));
}

MccTemplate MccGallery::Get(int t) const {
  MccTemplate out;
  const int n = template_size(t);
  const size_t s = start[t];
  out.num_minutiae = n;
  out.cylinders.resize(n);
  for (int j = 0; j < n; ++j) {
    MccCylinder& c = out.cylinders[j];
    for (int w = 0; w < kMccBitWords; ++w) c.bits[w] = bits[s * kMccBitWords + static_cast<size_t>(w) * n + j];
    for (int w = 0; w < kMccMaskWords; ++w) c.mask[w] = mask[s * kMccMaskWords + static_cast<size_t>(w) * n + j];
    c.x = x[s + j];
    c.y = y[s + j];
    c.theta = theta[s + j];
    c.minutia = j;
  }
  return out;
}

size_t MccGallery::bytes() const {
  return start.size() * 4 + bits.size() * 8 + mask.size() * 8 + x.size() * 12 + bit_count.size() * 2 +
         full_mask.size();
}

}  // namespace fingerprint
}  // namespace tessera
