// DMC constants, latent preparation (LUT_D, qualities), batch views, the
// device latent, result layout and backend dispatch.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/fingerprint/dmc.h"
#include "kernels/fingerprint/dmc_impl.h"

namespace tessera {
namespace fingerprint {

#if TESSERA_WITH_CUDA
namespace cuda {
// dmc.cu
absl::Status EnqueueDmcKernels(void* cuda_stream, const DmcLatentView& latent, const DmcBatchView& batch,
                               const DmcConstants& constants, const DmcKernelResults& out);
}  // namespace cuda
#endif

absl::StatusOr<DmcConstants> MakeDmcConstants(const DmcParams& p, const MccParams& mcc) {
  const float floats[] = {p.delta_theta,   p.min_similarity, p.cluster_distance, p.cluster_angle,
                          p.cluster_radius, p.quality_radius, p.quality_sigma,    p.quality_prior};
  for (float v : floats) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("DmcParams: parameters must be finite");
  }
  if (!(p.delta_theta > 0 && p.delta_theta <= fpmath::kPiF + 1e-5f)) {
    return absl::InvalidArgumentError(absl::StrCat("DmcParams: delta_theta ", p.delta_theta, " not in (0, pi]"));
  }
  if (!(p.min_matchable >= 0 && p.min_matchable <= 1)) {
    return absl::InvalidArgumentError("DmcParams: min_matchable must be in [0, 1]");
  }
  if (p.min_similarity < 0 || p.min_similarity >= 1) {
    return absl::InvalidArgumentError("DmcParams: min_similarity must be in [0, 1)");
  }
  if (p.cluster_distance <= 0 || p.cluster_angle <= 0 || p.cluster_radius <= 0 || p.quality_radius <= 0 ||
      p.quality_sigma <= 0 || p.quality_prior <= 0) {
    return absl::InvalidArgumentError("DmcParams: distances, angles, sigma and prior must be positive");
  }
  DmcConstants c;
  c.delta_theta = p.delta_theta + 1e-5f;
  c.min_common_cells = static_cast<int>(std::ceil(p.min_matchable * MccCellsInCircle(mcc) - 1e-9));
  c.min_similarity = p.min_similarity;
  c.cluster_distance2 = p.cluster_distance * p.cluster_distance;
  c.cluster_angle = p.cluster_angle;
  c.cluster_radius2 = p.cluster_radius * p.cluster_radius;
  c.quality_radius2 = p.quality_radius * p.quality_radius;
  c.quality_exp_scale = -1.0f / (2.0f * p.quality_sigma * p.quality_sigma);
  c.quality_prior = p.quality_prior;
  c.lut_margin = c.delta_theta + fpmath::kTwoPiF / kDmcLutBins;
  return c;
}

DmcLatentView DmcLatent::view() const {
  DmcLatentView v;
  v.bits = bits.data();
  v.mask = mask.data();
  v.x = x.data();
  v.y = y.data();
  v.theta = theta.data();
  v.bit_count = bit_count.data();
  v.quality = quality.data();
  v.lut_offset = lut_offset.data();
  v.lut_index = lut_index.data();
  v.n = n();
  return v;
}

absl::StatusOr<DmcLatent> PrepareDmcLatent(const MccTemplate& latent, const DmcConstants& c) {
  const int n = static_cast<int>(latent.cylinders.size());
  if (n > kDmcMaxLatentMinutiae) {
    return absl::InvalidArgumentError(
        absl::StrCat("DMC latent has ", n, " cylinders; at most ", kDmcMaxLatentMinutiae, " are supported"));
  }
  DmcLatent out;
  out.cylinders = latent;
  out.bits.reserve(static_cast<size_t>(n) * kMccBitWords);
  out.mask.reserve(static_cast<size_t>(n) * kMccMaskWords);
  for (const MccCylinder& cyl : latent.cylinders) {
    if (!std::isfinite(cyl.x) || !std::isfinite(cyl.y) || !std::isfinite(cyl.theta) || std::fabs(cyl.x) > 1e6f ||
        std::fabs(cyl.y) > 1e6f || std::fabs(cyl.theta) > 1e3f) {
      return absl::InvalidArgumentError("DMC latent: non-finite or huge minutia coordinates");
    }
    out.bits.insert(out.bits.end(), cyl.bits, cyl.bits + kMccBitWords);
    out.mask.insert(out.mask.end(), cyl.mask, cyl.mask + kMccMaskWords);
    out.x.push_back(cyl.x);
    out.y.push_back(cyl.y);
    out.theta.push_back(cyl.theta);
    int count = 0;
    for (int w = 0; w < kMccBitWords; ++w) count += __builtin_popcountll(cyl.bits[w]);
    out.bit_count.push_back(static_cast<uint16_t>(count));
  }
  out.quality.resize(n);
  cpu::TemplateQuality(n, out.x.data(), out.y.data(), out.theta.data(), c, out.quality.data());
  // LUT_D: bin b lists the latent minutiae within lut_margin of its centre.
  out.lut_offset.assign(kDmcLutBins + 1, 0);
  for (int b = 0; b < kDmcLutBins; ++b) {
    const float centre = (static_cast<float>(b) + 0.5f) * (fpmath::kTwoPiF / kDmcLutBins);
    for (int l = 0; l < n; ++l) {
      const float wrapped = out.theta[l] - fpmath::kTwoPiF * std::floor(out.theta[l] / fpmath::kTwoPiF);
      if (std::fabs(fpmath::AngleDiffF(wrapped, centre)) <= c.lut_margin) {
        out.lut_index.push_back(static_cast<int16_t>(l));
      }
    }
    out.lut_offset[b + 1] = static_cast<int32_t>(out.lut_index.size());
  }
  if (out.lut_index.empty()) out.lut_index.push_back(0);  // never a null device array
  return out;
}

// --- device latent ------------------------------------------------------------

namespace {

size_t Align16(size_t v) { return (v + 15) & ~static_cast<size_t>(15); }

}  // namespace

absl::StatusOr<DmcDeviceLatent> DmcDeviceLatent::Upload(const DmcLatent& latent, const Stream& stream) {
  if (stream.backend() != Backend::kCuda) {
    return absl::InvalidArgumentError("DmcDeviceLatent::Upload needs a CUDA stream");
  }
  const int n = latent.n();
  struct Part {
    const void* src;
    size_t bytes;
  };
  const Part parts[] = {
      {latent.bits.data(), latent.bits.size() * 8},          {latent.mask.data(), latent.mask.size() * 8},
      {latent.x.data(), n * 4u},                              {latent.y.data(), n * 4u},
      {latent.theta.data(), n * 4u},                          {latent.bit_count.data(), n * 2u},
      {latent.quality.data(), n * 4u},                        {latent.lut_offset.data(), latent.lut_offset.size() * 4},
      {latent.lut_index.data(), latent.lut_index.size() * 2},
  };
  size_t offsets[9];
  size_t total = 0;
  for (int p = 0; p < 9; ++p) {
    offsets[p] = total;
    total = Align16(total + parts[p].bytes);
  }
  DmcDeviceLatent d;
  TESSERA_ASSIGN_OR_RETURN(d.buffer_, Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(16, total),
                                                       stream.ordinal()));
  uint8_t* base = static_cast<uint8_t*>(d.buffer_->data());
  for (int p = 0; p < 9; ++p) {
    if (parts[p].bytes == 0) continue;
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(base + offsets[p], MemoryKind::kDevice, parts[p].src, MemoryKind::kHost, parts[p].bytes, stream));
  }
  d.view_.bits = reinterpret_cast<const uint64_t*>(base + offsets[0]);
  d.view_.mask = reinterpret_cast<const uint64_t*>(base + offsets[1]);
  d.view_.x = reinterpret_cast<const float*>(base + offsets[2]);
  d.view_.y = reinterpret_cast<const float*>(base + offsets[3]);
  d.view_.theta = reinterpret_cast<const float*>(base + offsets[4]);
  d.view_.bit_count = reinterpret_cast<const uint16_t*>(base + offsets[5]);
  d.view_.quality = reinterpret_cast<const float*>(base + offsets[6]);
  d.view_.lut_offset = reinterpret_cast<const int32_t*>(base + offsets[7]);
  d.view_.lut_index = reinterpret_cast<const int16_t*>(base + offsets[8]);
  d.view_.n = n;
  return d;
}

// --- batches and results ----------------------------------------------------------

DmcBatchView HostBatchView(const MccGallery& g, int begin, int end, std::vector<int32_t>* start) {
  begin = std::max(0, std::min(begin, g.num_templates()));
  end = std::max(begin, std::min(end, g.num_templates()));
  const int s0 = g.start[begin];
  start->clear();
  for (int t = begin; t <= end; ++t) start->push_back(g.start[t] - s0);
  DmcBatchView v;
  v.start = start->data();
  v.num_templates = end - begin;
  v.num_cylinders = g.start[end] - s0;
  v.bits = g.bits.data() + static_cast<size_t>(kMccBitWords) * s0;
  v.mask = g.mask.data() + static_cast<size_t>(kMccMaskWords) * s0;
  v.x = g.x.data() + s0;
  v.y = g.y.data() + s0;
  v.theta = g.theta.data() + s0;
  v.bit_count = g.bit_count.data() + s0;
  return v;
}

size_t DmcResultsBytes(int n) {
  const size_t m = static_cast<size_t>(std::max(0, n));
  return Align16(m * 2) + Align16(m * 4) + Align16(m * 4) + Align16(m) + Align16(m * kDmcMaxClusterSize);
}

DmcKernelResults DmcResultsAt(void* base, int n) {
  const size_t m = static_cast<size_t>(std::max(0, n));
  uint8_t* p = static_cast<uint8_t*>(base);
  DmcKernelResults r;
  r.best_latent = reinterpret_cast<int16_t*>(p);
  p += Align16(m * 2);
  r.similarity = reinterpret_cast<float*>(p);
  p += Align16(m * 4);
  r.quality = reinterpret_cast<float*>(p);
  p += Align16(m * 4);
  r.cluster_count = p;
  p += Align16(m);
  r.cluster_members = p;
  return r;
}

namespace {

absl::Status ValidateSizes(const DmcLatentView& latent, const DmcBatchView& batch) {
  if (latent.n < 0 || latent.n > kDmcMaxLatentMinutiae) {
    return absl::InvalidArgumentError(absl::StrCat("DMC latent of ", latent.n, " cylinders (0..255 supported)"));
  }
  if (batch.num_templates < 0 || batch.num_cylinders < 0) {
    return absl::InvalidArgumentError("DMC batch with negative size");
  }
  if (batch.num_cylinders > 0 && batch.num_templates == 0) {
    return absl::InvalidArgumentError("DMC batch has cylinders but no templates");
  }
  if (latent.n > 0 && (latent.bits == nullptr || latent.mask == nullptr || latent.x == nullptr ||
                       latent.y == nullptr || latent.theta == nullptr || latent.bit_count == nullptr)) {
    return absl::InvalidArgumentError("DMC latent view has null arrays");
  }
  if (latent.lut_offset == nullptr || latent.lut_index == nullptr) {
    return absl::InvalidArgumentError("DMC latent view has no LUT_D");
  }
  if (batch.num_templates > 0 && batch.start == nullptr) return absl::InvalidArgumentError("DMC batch: no start table");
  if (batch.num_cylinders > 0 && (batch.bits == nullptr || batch.mask == nullptr || batch.x == nullptr ||
                                  batch.y == nullptr || batch.theta == nullptr || batch.bit_count == nullptr)) {
    return absl::InvalidArgumentError("DMC batch view has null arrays");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateDmcBatch(const DmcLatentView& latent, const DmcBatchView& batch) {
  TESSERA_RETURN_IF_ERROR(ValidateSizes(latent, batch));
  if (batch.num_templates == 0) return absl::OkStatus();
  if (batch.start[0] != 0) return absl::InvalidArgumentError("DMC batch start table must begin at 0");
  for (int t = 0; t < batch.num_templates; ++t) {
    const int size = batch.start[t + 1] - batch.start[t];
    if (size < 0 || size > kMccMaxMinutiae) {
      return absl::InvalidArgumentError(absl::StrCat("DMC batch template ", t, " has ", size, " cylinders"));
    }
  }
  if (batch.start[batch.num_templates] != batch.num_cylinders) {
    return absl::InvalidArgumentError(absl::StrCat("DMC batch start table ends at ", batch.start[batch.num_templates],
                                                   " but the batch has ", batch.num_cylinders, " cylinders"));
  }
  return absl::OkStatus();
}

absl::Status EnqueueDmcKernels(void* cuda_stream, const DmcLatentView& latent, const DmcBatchView& batch,
                               int max_template_size, const DmcConstants& constants, const DmcKernelResults& out) {
  TESSERA_RETURN_IF_ERROR(ValidateSizes(latent, batch));
  if (max_template_size < 0 || max_template_size > kMccMaxMinutiae) {
    return absl::InvalidArgumentError(absl::StrCat("DMC batch max template size ", max_template_size));
  }
  if (batch.num_cylinders > 0 && (out.best_latent == nullptr || out.similarity == nullptr ||
                                  out.quality == nullptr || out.cluster_count == nullptr ||
                                  out.cluster_members == nullptr)) {
    return absl::InvalidArgumentError("DMC kernel outputs have null arrays");
  }
#if TESSERA_WITH_CUDA
  if (batch.num_cylinders == 0) return absl::OkStatus();
  return cuda::EnqueueDmcKernels(cuda_stream, latent, batch, constants, out);
#else
  (void)cuda_stream;
  (void)constants;
  return absl::FailedPreconditionError(
      absl::StrCat("dmc: CUDA kernels requested but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

absl::Status RunDmcKernelsOnGallery(const Stream& stream, const DmcLatent& latent, const MccGallery& gallery,
                                    int begin, int end, const DmcConstants& constants,
                                    const DmcKernelResults& host_out, int threads) {
  if (begin < 0 || end < begin || end > gallery.num_templates()) {
    return absl::InvalidArgumentError(absl::StrCat("DMC: template range [", begin, ", ", end, ") of a gallery of ",
                                                   gallery.num_templates()));
  }
  std::vector<int32_t> start;
  const DmcBatchView host = HostBatchView(gallery, begin, end, &start);
  TESSERA_RETURN_IF_ERROR(ValidateDmcBatch(latent.view(), host));
  if (stream.backend() == Backend::kCpu) {
    cpu::RunDmcKernels(latent.view(), host, constants, host_out, threads);
    return absl::OkStatus();
  }
  const int n = host.num_cylinders;
  if (n == 0) return absl::OkStatus();
  int max_size = 0;
  for (int t = 0; t < host.num_templates; ++t) max_size = std::max(max_size, start[t + 1] - start[t]);
  TESSERA_ASSIGN_OR_RETURN(DmcDeviceLatent d_latent, DmcDeviceLatent::Upload(latent, stream));
  // The batch in one device buffer: start, bits, mask, x, y, theta, counts.
  const size_t sizes[] = {start.size() * 4, static_cast<size_t>(n) * kMccBitWords * 8,
                          static_cast<size_t>(n) * kMccMaskWords * 8, n * 4u, n * 4u, n * 4u, n * 2u};
  const void* srcs[] = {start.data(), host.bits, host.mask, host.x, host.y, host.theta, host.bit_count};
  size_t offsets[7], total = 0;
  for (int p = 0; p < 7; ++p) {
    offsets[p] = total;
    total = Align16(total + sizes[p]);
  }
  TESSERA_ASSIGN_OR_RETURN(auto batch_buffer, Buffer::Allocate(MemoryKind::kDevice, total, stream.ordinal()));
  uint8_t* base = static_cast<uint8_t*>(batch_buffer->data());
  for (int p = 0; p < 7; ++p) {
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(base + offsets[p], MemoryKind::kDevice, srcs[p], MemoryKind::kHost, sizes[p], stream));
  }
  DmcBatchView dev;
  dev.start = reinterpret_cast<const int32_t*>(base + offsets[0]);
  dev.bits = reinterpret_cast<const uint64_t*>(base + offsets[1]);
  dev.mask = reinterpret_cast<const uint64_t*>(base + offsets[2]);
  dev.x = reinterpret_cast<const float*>(base + offsets[3]);
  dev.y = reinterpret_cast<const float*>(base + offsets[4]);
  dev.theta = reinterpret_cast<const float*>(base + offsets[5]);
  dev.bit_count = reinterpret_cast<const uint16_t*>(base + offsets[6]);
  dev.num_templates = host.num_templates;
  dev.num_cylinders = n;
  const size_t result_bytes = DmcResultsBytes(n);
  TESSERA_ASSIGN_OR_RETURN(auto out_buffer, Buffer::Allocate(MemoryKind::kDevice, result_bytes, stream.ordinal()));
  const DmcKernelResults d_out = DmcResultsAt(out_buffer->data(), n);
  TESSERA_RETURN_IF_ERROR(EnqueueDmcKernels(stream.native(), d_latent.view(), dev, max_size, constants, d_out));
  // Back into the caller's arrays (which need not be one block).
  const std::pair<void*, const void*> copies[] = {
      {host_out.best_latent, d_out.best_latent}, {host_out.similarity, d_out.similarity},
      {host_out.quality, d_out.quality},         {host_out.cluster_count, d_out.cluster_count},
      {host_out.cluster_members, d_out.cluster_members}};
  const size_t copy_bytes[] = {n * 2u, n * 4u, n * 4u, static_cast<size_t>(n),
                               static_cast<size_t>(n) * kDmcMaxClusterSize};
  for (int p = 0; p < 5; ++p) {
    TESSERA_RETURN_IF_ERROR(CopyBytes(copies[p].first, MemoryKind::kHost, copies[p].second, MemoryKind::kDevice,
                                      copy_bytes[p], stream));
  }
  return stream.Synchronize();  // the buffers above die on return
}

}  // namespace fingerprint
}  // namespace tessera
