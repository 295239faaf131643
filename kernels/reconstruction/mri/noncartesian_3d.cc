#include "kernels/reconstruction/mri/noncartesian_3d.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/density_compensation.h"
#include "kernels/reconstruction/nufft/fftw_util.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

int64_t Mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

// How far from an integer a partition's kz may be (cycles/FOV): float rounding
// of fraction x matrix; the phase error it leaves, pi x 2e-5, is of the order
// of the NUFFT tolerance.
constexpr double kIntegerSlack = 2e-5;

// A host vector in the stream's memory (the data itself on the CPU).
template <typename T>
class OnStream {
 public:
  static absl::StatusOr<OnStream> Make(const T* host, int64_t n, const Stream& stream) {
    OnStream o;
    if (host == nullptr || stream.backend() == Backend::kCpu) {
      o.ptr_ = host;
      return o;
    }
    TESSERA_ASSIGN_OR_RETURN(o.buffer_, Buffer::Allocate(MemoryKind::kDevice, n * sizeof(T), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(o.buffer_->data(), MemoryKind::kDevice, host, MemoryKind::kHost, n * sizeof(T), stream));
    o.ptr_ = static_cast<const T*>(o.buffer_->data());
    return o;
  }
  const T* get() const { return ptr_; }

 private:
  std::shared_ptr<Buffer> buffer_;
  const T* ptr_ = nullptr;
};

// An output image in the stream's memory, copied to `host` by Finish.
class OutOnStream {
 public:
  static absl::StatusOr<OutOnStream> Make(std::complex<float>* host, int64_t n, const Stream& stream) {
    OutOnStream o;
    o.host_ = host;
    o.n_ = n;
    o.stream_ = &stream;
    if (stream.backend() == Backend::kCuda) {
      TESSERA_ASSIGN_OR_RETURN(o.buffer_, Buffer::Allocate(MemoryKind::kDevice, n * sizeof(std::complex<float>),
                                                           stream.ordinal()));
    }
    return o;
  }
  std::complex<float>* get() { return buffer_ ? static_cast<std::complex<float>*>(buffer_->data()) : host_; }
  absl::Status Finish() {
    if (buffer_) {
      TESSERA_RETURN_IF_ERROR(CopyBytes(host_, MemoryKind::kHost, buffer_->data(), MemoryKind::kDevice,
                                        n_ * sizeof(std::complex<float>), *stream_));
    }
    return stream_->Synchronize();
  }

 private:
  std::complex<float>* host_ = nullptr;
  int64_t n_ = 0;
  std::shared_ptr<Buffer> buffer_;
  const Stream* stream_ = nullptr;
};

absl::Status CheckProblem(const NonCartesian3D& p) {
  if (p.nx < 2 || p.ny < 2 || p.nz < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("3-D MRI: image ", p.nx, " x ", p.ny, " x ", p.nz, " (each side must be >= 2)"));
  }
  if (p.coils < 1) return absl::InvalidArgumentError(absl::StrCat("3-D MRI: coils = ", p.coils, " < 1"));
  if (p.points < 1) return absl::InvalidArgumentError(absl::StrCat("3-D MRI: points = ", p.points, " < 1"));
  if (p.kx == nullptr || p.ky == nullptr || p.kz == nullptr || p.kspace == nullptr || p.maps == nullptr) {
    return absl::InvalidArgumentError("3-D MRI: trajectory, k-space or coil maps are null");
  }
  return absl::OkStatus();
}

absl::Status StackPath(const Stream& stream, const NonCartesian3D& p, const StackOfStarsLayout& layout,
                       const Recon3DOptions& options, std::complex<float>* image, Recon3DResult* result) {
  const int64_t per = layout.points_per_partition, npix = p.nx * p.ny;
  TESSERA_ASSIGN_OR_RETURN(const std::vector<std::complex<float>> slices,
                           PartitionsToSlices(layout, p.kspace, p.coils, p.nz));
  // Maps coils x nz x plane -> nz x coils x plane (a set per slice).
  std::vector<std::complex<float>> maps(static_cast<size_t>(p.coils) * p.nz * npix);
  for (int64_t z = 0; z < p.nz; ++z) {
    for (int c = 0; c < p.coils; ++c) {
      std::memcpy(maps.data() + (z * p.coils + c) * npix, p.maps + (c * p.nz + z) * npix,
                  npix * sizeof(std::complex<float>));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(auto kx, OnStream<float>::Make(p.kx, per, stream));  // partition 0's points
  TESSERA_ASSIGN_OR_RETURN(auto ky, OnStream<float>::Make(p.ky, per, stream));
  TESSERA_ASSIGN_OR_RETURN(auto weights, OnStream<float>::Make(p.density_weights, per, stream));
  TESSERA_ASSIGN_OR_RETURN(auto kspace, OnStream<std::complex<float>>::Make(slices.data(), slices.size(), stream));
  TESSERA_ASSIGN_OR_RETURN(auto d_maps, OnStream<std::complex<float>>::Make(maps.data(), maps.size(), stream));
  TESSERA_ASSIGN_OR_RETURN(OutOnStream out, OutOnStream::Make(image, npix * p.nz, stream));
  SenseStack stack;
  stack.geometry = SenseGeometry{p.nx, p.ny, p.coils, per, kx.get(), ky.get(), d_maps.get(), weights.get()};
  stack.slices = p.nz;
  stack.slices_per_map_set = 1;
  if (options.adjoint_only) {
    SenseOperatorOptions op_options = options.cg.nufft;
    TESSERA_RETURN_IF_ERROR(AdjointSenseStack(stream, stack, kspace.get(), op_options, out.get(), options.slice_done));
  } else {
    TESSERA_ASSIGN_OR_RETURN(std::vector<CgSenseResult> r,
                             CgSenseStack(stream, stack, kspace.get(), options.cg, out.get(), options.slice_done));
    for (const CgSenseResult& s : r) {
      result->iterations = std::max(result->iterations, s.cg.iterations);
      result->relative_residual = std::max(result->relative_residual, s.cg.relative_residual);
    }
  }
  return out.Finish();
}

absl::Status NufftPath(const Stream& stream, const NonCartesian3D& p, const Recon3DOptions& options,
                       std::complex<float>* image, Recon3DResult* result) {
  const int64_t npix = p.nx * p.ny * p.nz;
  TESSERA_ASSIGN_OR_RETURN(auto kx, OnStream<float>::Make(p.kx, p.points, stream));
  TESSERA_ASSIGN_OR_RETURN(auto ky, OnStream<float>::Make(p.ky, p.points, stream));
  TESSERA_ASSIGN_OR_RETURN(auto kz, OnStream<float>::Make(p.kz, p.points, stream));
  TESSERA_ASSIGN_OR_RETURN(auto weights, OnStream<float>::Make(p.density_weights, p.points, stream));
  TESSERA_ASSIGN_OR_RETURN(auto kspace, OnStream<std::complex<float>>::Make(p.kspace, p.coils * p.points, stream));
  TESSERA_ASSIGN_OR_RETURN(auto maps, OnStream<std::complex<float>>::Make(p.maps, p.coils * npix, stream));
  TESSERA_ASSIGN_OR_RETURN(OutOnStream out, OutOnStream::Make(image, npix, stream));
  SenseGeometry g{p.nx, p.ny, p.coils, p.points, kx.get(), ky.get(), maps.get(), weights.get(), p.nz, kz.get()};
  if (options.adjoint_only) {
    TESSERA_RETURN_IF_ERROR(AdjointSense(stream, g, kspace.get(), options.cg.nufft, out.get()));
  } else {
    TESSERA_ASSIGN_OR_RETURN(CgSenseResult r, CgSense(stream, g, kspace.get(), options.cg, out.get()));
    result->iterations = r.cg.iterations;
    result->relative_residual = r.cg.relative_residual;
  }
  return out.Finish();
}

}  // namespace

const char* Path3DName(Path3D path) {
  return path == Path3D::kStackOfStars ? "stack of stars (kz FFT + 2-D slices)" : "3-D NUFFT";
}

std::optional<StackOfStarsLayout> DetectStackOfStars(int64_t points, const float* kx, const float* ky,
                                                     const float* kz, const float* weights, int64_t nz) {
  if (nz < 1 || points % nz != 0) return std::nullopt;
  StackOfStarsLayout layout;
  layout.points_per_partition = points / nz;
  const int64_t per = layout.points_per_partition;
  std::vector<bool> seen(nz, false);
  for (int64_t part = 0; part < nz; ++part) {
    const int64_t base = part * per;
    const float k = kz[base];
    // Integers up to float rounding (ISMRMRD stores fractions of the matrix).
    const double rounded = std::round(double{k});
    if (!(std::abs(k - rounded) <= kIntegerSlack) || rounded < -(nz / 2) || rounded >= nz - nz / 2) {
      return std::nullopt;
    }
    const int64_t index = static_cast<int64_t>(rounded) + nz / 2;
    if (seen[index]) return std::nullopt;
    seen[index] = true;
    for (int64_t j = 0; j < per; ++j) {
      if (kz[base + j] != k || kx[base + j] != kx[j] || ky[base + j] != ky[j]) return std::nullopt;
      if (weights != nullptr && weights[base + j] != weights[j]) return std::nullopt;
    }
    layout.partition_kz.push_back(static_cast<int64_t>(rounded));
  }
  return layout;
}

absl::StatusOr<std::vector<std::complex<float>>> PartitionsToSlices(const StackOfStarsLayout& layout,
                                                                    const std::complex<float>* kspace, int coils,
                                                                    int64_t nz) {
  const int64_t per = layout.points_per_partition, lines = coils * per;
  std::vector<std::complex<float>> slices(static_cast<size_t>(nz) * lines);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<nufft::FftwPlan<float>> plan, nufft::FftwPlan<float>::Create({nz, 1, 1}, +1));
  const float scale = 1.0f / static_cast<float>(nz);
  // One kz line (coil c, point j) at a time: ifftshift by kz, DFT, fftshift.
  ParallelFor(lines, [&](int64_t begin, int64_t end, int) {
    nufft::FftwArray<float> work = nufft::AllocFftwArray<float>(nz);
    for (int64_t line = begin; line < end; ++line) {
      const int64_t c = line / per, j = line % per;
      for (int64_t part = 0; part < nz; ++part) {
        work[Mod(layout.partition_kz[part], nz)] = kspace[c * nz * per + part * per + j];
      }
      plan->Execute(work.get());
      for (int64_t z = 0; z < nz; ++z) slices[z * lines + line] = scale * work[Mod(z - nz / 2, nz)];
    }
  }, 256);
  return slices;
}

absl::StatusOr<std::vector<float>> DensityCompensation3D(const NonCartesian3D& p, int64_t samples) {
  TESSERA_RETURN_IF_ERROR(CheckProblem(p));
  if (samples < 2 || p.points % samples != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("3-D density compensation: ", p.points, " points are not readouts of ", samples, " samples"));
  }
  std::vector<float> weights(p.points);
  if (std::optional<StackOfStarsLayout> layout = DetectStackOfStars(p.points, p.kx, p.ky, p.kz, nullptr, p.nz);
      layout.has_value() && layout->points_per_partition % samples == 0) {
    Trajectory2D star;
    star.samples = samples;
    star.spokes = layout->points_per_partition / samples;
    star.kx.assign(p.kx, p.kx + layout->points_per_partition);
    star.ky.assign(p.ky, p.ky + layout->points_per_partition);
    TESSERA_ASSIGN_OR_RETURN(std::vector<float> plane, PipeMenonDensity(star));
    for (int64_t part = 0; part < p.nz; ++part) {
      std::copy(plane.begin(), plane.end(), weights.begin() + part * layout->points_per_partition);
    }
    return weights;
  }
  const double spokes = static_cast<double>(p.points / samples);
  const double dk = std::sqrt(double{p.kx[1] - p.kx[0]} * (p.kx[1] - p.kx[0]) +
                              double{p.ky[1] - p.ky[0]} * (p.ky[1] - p.ky[0]) +
                              double{p.kz[1] - p.kz[0]} * (p.kz[1] - p.kz[0]));
  constexpr double kPi = 3.14159265358979323846;
  for (int64_t j = 0; j < p.points; ++j) {
    const double r2 = double{p.kx[j]} * p.kx[j] + double{p.ky[j]} * p.ky[j] + double{p.kz[j]} * p.kz[j];
    weights[j] = static_cast<float>(r2 < 0.25 * dk * dk ? kPi / 6 * dk * dk * dk / spokes : 2 * kPi * r2 * dk / spokes);
  }
  return weights;
}

absl::StatusOr<Recon3DResult> ReconstructNonCartesian3D(const Stream& stream, const NonCartesian3D& problem,
                                                        const Recon3DOptions& options, std::complex<float>* image) {
  TESSERA_RETURN_IF_ERROR(CheckProblem(problem));
  if (image == nullptr) return absl::InvalidArgumentError("3-D MRI: image is null");
  Recon3DResult result;
  std::optional<StackOfStarsLayout> layout;
  if (options.allow_stack_of_stars) {
    layout = DetectStackOfStars(problem.points, problem.kx, problem.ky, problem.kz, problem.density_weights,
                                problem.nz);
  }
  if (layout.has_value()) {
    result.path = Path3D::kStackOfStars;
    TESSERA_RETURN_IF_ERROR(StackPath(stream, problem, *layout, options, image, &result));
  } else {
    result.path = Path3D::kNufft3D;
    TESSERA_RETURN_IF_ERROR(NufftPath(stream, problem, options, image, &result));
  }
  return result;
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
