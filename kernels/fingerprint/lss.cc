// LSS constants, probe preparation, the device gallery and backend dispatch.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/lss_impl.h"

namespace tessera {
namespace fingerprint {

LssConstants MakeLssConstants(const LssParams& p, const MccParams& mcc) {
  LssConstants c;
  // 1e-5 rad of slack so that directions exactly delta_theta apart (90 degrees
  // = 64 ISO units) are matchable whichever way float rounding of the wrapped
  // difference goes.
  c.delta_theta = p.delta_theta + 1e-5f;
  c.min_common_cells = static_cast<int>(std::ceil(p.min_matchable * MccCellsInCircle(mcc) - 1e-9));
  c.relaxation_iterations = p.relaxation_iterations;
  c.w_r = p.w_r;
  c.one_minus_w_r = 1.0f - p.w_r;
  // Z(d) < 1e-7 once -tau (d - mu) < -ln(1e7), i.e. d > mu + ln(1e7) / -tau.
  auto cut = [](float mu, float tau) {
    return tau < 0 ? static_cast<float>(mu + std::log(1e7) / -tau) : std::numeric_limits<float>::infinity();
  };
  c.mu1 = p.mu_rho1;
  c.tau1 = p.tau_rho1;
  c.cut1 = cut(p.mu_rho1, p.tau_rho1);
  c.mu2 = p.mu_rho2;
  c.tau2 = p.tau_rho2;
  c.cut2 = cut(p.mu_rho2, p.tau_rho2);
  c.mu3 = p.mu_rho3;
  c.tau3 = p.tau_rho3;
  c.cut3 = cut(p.mu_rho3, p.tau_rho3);
  c.exp_lo = -87.0f;
  c.exp_hi = 88.0f;
  for (int n = 0; n <= kMccMaxMinutiae; ++n) {
    const double z = 1.0 / (1.0 + std::exp(-p.tau_p * (n - p.mu_p)));
    c.np_table[n] = static_cast<uint8_t>(p.min_np + std::lround(z * (p.max_np - p.min_np)));
  }
  const char* no_avx512 = std::getenv("TESSERA_FP_NO_AVX512");
  c.cpu_path = no_avx512 != nullptr && no_avx512[0] == '1' ? LssCpuPath::kScalar : LssCpuPath::kAuto;
  return c;
}

LssProbe PrepareProbe(const MccTemplate& probe, const MccParams& mcc) {
  uint64_t circle[kMccMaskWords];
  MccCircleMask(mcc, circle);
  LssProbe out;
  out.cylinders = probe;
  for (const MccCylinder& c : probe.cylinders) {
    int n = 0;
    for (int w = 0; w < kMccBitWords; ++w) n += __builtin_popcountll(c.bits[w]);
    bool full = true;
    for (int w = 0; w < kMccMaskWords; ++w) full = full && c.mask[w] == circle[w];
    out.bit_count.push_back(static_cast<uint16_t>(n));
    out.full_mask.push_back(full ? 1 : 0);
  }
  const std::vector<MccCylinder>& c = probe.cylinders;
  const int n = static_cast<int>(c.size());
  out.by_theta.resize(n);
  for (int i = 0; i < n; ++i) out.by_theta[i] = i;
  std::stable_sort(out.by_theta.begin(), out.by_theta.end(),
                   [&c](int a, int b) { return c[a].theta < c[b].theta; });
  // Twice round the circle (see LssProbe): position n + q is position q
  // with theta + 2 pi.
  for (int i = 0; i < n; ++i) out.by_theta.push_back(out.by_theta[i]);
  for (int q = 0; q < 2 * n; ++q) {
    const float theta = c[out.by_theta[q]].theta;
    out.sorted_theta.push_back(q < n ? theta : theta + fpmath::kTwoPiF);
  }
  out.soa_stride = (2 * n + 7) & ~7;
  out.sorted_theta.resize(out.soa_stride + 8, std::numeric_limits<float>::infinity());
  out.soa_bits.assign(static_cast<size_t>(kMccBitWords) * out.soa_stride + 8, 0);
  out.soa_mask.assign(static_cast<size_t>(kMccMaskWords) * out.soa_stride + 8, 0);
  out.soa_layer_sum.assign(static_cast<size_t>(3 * kMccMaskWords) * out.soa_stride + 8, 0);
  out.soa_count.assign(out.soa_stride + 8, 0);
  out.soa_sqrt_count.assign(out.soa_stride + 8, 0.0f);
  for (int q = 0; q < 2 * n; ++q) {
    const MccCylinder& cyl = c[out.by_theta[q]];
    for (int w = 0; w < kMccBitWords; ++w) out.soa_bits[static_cast<size_t>(w) * out.soa_stride + q] = cyl.bits[w];
    for (int w = 0; w < kMccMaskWords; ++w) out.soa_mask[static_cast<size_t>(w) * out.soa_stride + q] = cyl.mask[w];
    uint64_t planes[3 * kMccMaskWords];
    LayerSumPlanes(cyl.bits, planes);
    for (int w = 0; w < 3 * kMccMaskWords; ++w) {
      out.soa_layer_sum[static_cast<size_t>(w) * out.soa_stride + q] = planes[w];
    }
    out.soa_count[q] = out.bit_count[out.by_theta[q]];
    out.soa_sqrt_count[q] = sqrtf(static_cast<float>(out.soa_count[q]));
  }
  out.pair_dist.resize(static_cast<size_t>(n) * n);
  out.pair_dir.resize(static_cast<size_t>(n) * n);
  out.pair_radial.resize(static_cast<size_t>(n) * n);
  for (int t = 0; t < n; ++t) {
    for (int k = 0; k < n; ++k) {
      const lss_internal::PairGeometry g =
          lss_internal::Geometry(c[t].x, c[t].y, c[t].theta, c[k].x, c[k].y, c[k].theta);
      out.pair_dist[static_cast<size_t>(t) * n + k] = g.dist;
      out.pair_dir[static_cast<size_t>(t) * n + k] = g.dir;
      out.pair_radial[static_cast<size_t>(t) * n + k] = g.radial;
    }
  }
  return out;
}

// --- MccDeviceGallery ---------------------------------------------------------

int LssScratchTemplateSize(const int32_t* start, int num_templates, double quantile) {
  if (num_templates <= 0 || start == nullptr) return 0;
  // Sizes are 0..kMccMaxMinutiae (larger ones counted in the last bucket).
  std::vector<int64_t> count(kMccMaxMinutiae + 2, 0);
  for (int t = 0; t < num_templates; ++t) {
    const int n = start[t + 1] - start[t];
    ++count[std::min(std::max(n, 0), kMccMaxMinutiae + 1)];
  }
  const double q = std::min(1.0, std::max(0.0, quantile));
  // The smallest size s with at least ceil(q * n) templates of size <= s.
  const int64_t want = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * num_templates)));
  int64_t seen = 0;
  for (int s = 0; s < static_cast<int>(count.size()); ++s) {
    seen += count[s];
    if (seen >= want) return s;
  }
  return kMccMaxMinutiae + 1;
}

absl::StatusOr<MccDeviceGallery> MccDeviceGallery::Upload(const MccGallery& g, const Stream& stream) {
  if (stream.backend() != Backend::kCuda) {
    return absl::InvalidArgumentError("MccDeviceGallery::Upload needs a CUDA stream");
  }
  MccDeviceGallery d;
  d.num_templates_ = g.num_templates();
  d.num_cylinders_ = g.num_cylinders();
  d.max_template_size_ = g.max_template_size();
  d.scratch_template_size_ = LssScratchTemplateSize(g.start.data(), g.num_templates());
  d.ordinal_ = stream.ordinal();
  TESSERA_ASSIGN_OR_RETURN(d.start_, UploadVector(g.start, stream));
  TESSERA_ASSIGN_OR_RETURN(d.bits_, UploadVector(g.bits, stream));
  TESSERA_ASSIGN_OR_RETURN(d.mask_, UploadVector(g.mask, stream));
  TESSERA_ASSIGN_OR_RETURN(d.x_, UploadVector(g.x, stream));
  TESSERA_ASSIGN_OR_RETURN(d.y_, UploadVector(g.y, stream));
  TESSERA_ASSIGN_OR_RETURN(d.theta_, UploadVector(g.theta, stream));
  TESSERA_ASSIGN_OR_RETURN(d.bit_count_, UploadVector(g.bit_count, stream));
  TESSERA_ASSIGN_OR_RETURN(d.full_mask_, UploadVector(g.full_mask, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // the host vectors may go away
  return d;
}

size_t MccDeviceGallery::bytes() const {
  size_t n = 0;
  for (const auto* b : {&start_, &bits_, &mask_, &x_, &y_, &theta_, &bit_count_, &full_mask_}) {
    if (*b) n += (*b)->size();
  }
  return n;
}

const int32_t* MccDeviceGallery::start() const { return static_cast<const int32_t*>(start_->data()); }
const uint64_t* MccDeviceGallery::bits() const { return static_cast<const uint64_t*>(bits_->data()); }
const uint64_t* MccDeviceGallery::mask() const { return static_cast<const uint64_t*>(mask_->data()); }
const float* MccDeviceGallery::x() const { return static_cast<const float*>(x_->data()); }
const float* MccDeviceGallery::y() const { return static_cast<const float*>(y_->data()); }
const float* MccDeviceGallery::theta() const { return static_cast<const float*>(theta_->data()); }
const uint16_t* MccDeviceGallery::bit_count() const { return static_cast<const uint16_t*>(bit_count_->data()); }
const uint8_t* MccDeviceGallery::full_mask() const { return static_cast<const uint8_t*>(full_mask_->data()); }

MccDeviceGalleryView MccDeviceGallery::view() const {
  MccDeviceGalleryView v;
  v.start = start();
  v.bits = bits();
  v.mask = mask();
  v.x = x();
  v.y = y();
  v.theta = theta();
  v.bit_count = bit_count();
  v.full_mask = full_mask();
  v.num_templates = num_templates_;
  v.num_cylinders = num_cylinders_;
  v.max_template_size = max_template_size_;
  v.scratch_template_size = scratch_template_size_;
  v.ordinal = ordinal_;
  return v;
}

absl::Status ScoreGallery(const Stream& stream, const LssProbe& probe, const MccDeviceGallery& gallery,
                          MccScore kind, const LssConstants& constants, float* scores) {
  if (stream.backend() != Backend::kCuda) {
    return absl::InvalidArgumentError("ScoreGallery on a device gallery needs a CUDA stream");
  }
  if (stream.ordinal() != gallery.ordinal()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream on GPU ", stream.ordinal(), " but the gallery is on GPU ", gallery.ordinal()));
  }
  if (gallery.num_templates() == 0) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(auto out, Buffer::Allocate(MemoryKind::kDevice,
                                                      sizeof(float) * gallery.num_templates(), stream.ordinal()));
#if TESSERA_WITH_CUDA
  TESSERA_RETURN_IF_ERROR(
      cuda::ScoreGalleryToDevice(stream, probe, gallery, kind, constants, static_cast<float*>(out->data())));
  TESSERA_RETURN_IF_ERROR(CopyBytes(scores, MemoryKind::kHost, out->data(), MemoryKind::kDevice,
                                    sizeof(float) * gallery.num_templates(), stream));
  return stream.Synchronize();
#else
  (void)probe;
  (void)kind;
  (void)constants;
  (void)scores;
  return absl::FailedPreconditionError(
      absl::StrCat("lss: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

namespace cuda {
const char* LssCudaKernelName(LssCudaKernel kernel) {
  switch (kernel) {
    case LssCudaKernel::kBlock:
      return "block";
    case LssCudaKernel::kWarpMma:
      return "warp-mma";
  }
  return "unknown";
}
}  // namespace cuda

}  // namespace fingerprint
}  // namespace tessera
