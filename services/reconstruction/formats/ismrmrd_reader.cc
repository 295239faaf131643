#include "services/reconstruction/formats/ismrmrd_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ismrmrd/dataset.h"
#include "ismrmrd/ismrmrd.h"
#include "ismrmrd/xml.h"

namespace tessera::recon::formats {
namespace {

bool Skipped(ISMRMRD::Acquisition& acq) {
  return acq.isFlagSet(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT) ||
         acq.isFlagSet(ISMRMRD::ISMRMRD_ACQ_IS_NAVIGATION_DATA) ||
         acq.isFlagSet(ISMRMRD::ISMRMRD_ACQ_IS_PHASECORR_DATA);
}

// The single-frame restriction, named per counter (slices and repetitions
// are stacks, checked by the non-Cartesian reader: StackReadouts).
absl::Status CheckSingleFrame(ISMRMRD::Acquisition& acq, uint32_t index, const std::string& path) {
  const ISMRMRD::EncodingCounters& idx = acq.idx();
  const std::pair<const char*, uint16_t> counters[] = {
      {"contrast", idx.contrast}, {"phase", idx.phase}, {"set", idx.set}, {"average", idx.average},
  };
  for (const auto& [name, value] : counters) {
    if (value != 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": acquisition ", index, " has ", name, " ", value,
                                                     "; only one ", name, " is supported"));
    }
  }
  return absl::OkStatus();
}

// Non-Cartesian stacks (issue 40): the readouts of each (repetition, slice)
// in file order, every pair present with the same count.
struct Stack {
  int64_t repetitions = 1, slices = 1, readouts = 0;
  std::vector<std::vector<size_t>> images;  // index repetition + repetitions * slice -> acquisitions
};

absl::StatusOr<Stack> StackReadouts(std::vector<ISMRMRD::Acquisition>& kept, const std::string& path) {
  Stack st;
  for (ISMRMRD::Acquisition& acq : kept) {
    st.repetitions = std::max<int64_t>(st.repetitions, acq.idx().repetition + 1);
    st.slices = std::max<int64_t>(st.slices, acq.idx().slice + 1);
  }
  st.images.resize(st.repetitions * st.slices);
  for (size_t a = 0; a < kept.size(); ++a) {
    st.images[kept[a].idx().repetition + st.repetitions * kept[a].idx().slice].push_back(a);
  }
  st.readouts = static_cast<int64_t>(st.images[0].size());
  for (int64_t i = 0; i < static_cast<int64_t>(st.images.size()); ++i) {
    if (static_cast<int64_t>(st.images[i].size()) != st.readouts) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": slice ", i / st.repetitions, " repetition ", i % st.repetitions, " has ", st.images[i].size(),
          " readouts, slice 0 repetition 0 has ", st.readouts, " (every slice and repetition needs the same readouts)"));
    }
  }
  return st;
}

int64_t Offset(uint16_t step, const ISMRMRD::Optional<ISMRMRD::Limit>& limit, int64_t n) {
  const int64_t center = limit ? limit->center : n / 2;
  return static_cast<int64_t>(step) - center + n / 2;
}

absl::StatusOr<IsmrmrdRawData> Read(const std::string& path, const IsmrmrdReadOptions& options) {
  ISMRMRD::Dataset dataset(path.c_str(), options.group.c_str(), /*create_file_if_needed=*/false);
  std::string xml;
  dataset.readHeader(xml);
  ISMRMRD::IsmrmrdHeader header;
  try {
    ISMRMRD::deserialize(xml.c_str(), header);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the XML header does not parse (", e.what(), ")"));
  }
  if (header.encoding.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": the header has no encoding"));
  const ISMRMRD::Encoding& encoding = header.encoding[0];
  IsmrmrdRawData raw;
  raw.matrix = {encoding.encodedSpace.matrixSize.x, encoding.encodedSpace.matrixSize.y,
                encoding.encodedSpace.matrixSize.z};
  raw.fov_mm = {encoding.encodedSpace.fieldOfView_mm.x, encoding.encodedSpace.fieldOfView_mm.y,
                encoding.encodedSpace.fieldOfView_mm.z};
  for (int a = 0; a < 3; ++a) {
    if (raw.matrix[a] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": encoded matrix axis ", a, " is ", raw.matrix[a]));
    }
  }

  const uint32_t total = dataset.getNumberOfAcquisitions();
  std::vector<ISMRMRD::Acquisition> kept;
  for (uint32_t i = 0; i < total; ++i) {
    ISMRMRD::Acquisition acq;
    dataset.readAcquisition(i, acq);
    if (Skipped(acq)) {
      ++raw.acquisitions_skipped;
      continue;
    }
    if (absl::Status s = CheckSingleFrame(acq, i, path); !s.ok()) return s;
    if (!kept.empty()) {
      ISMRMRD::Acquisition& first = kept.front();
      if (acq.active_channels() != first.active_channels()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": acquisition ", i, " has ", acq.active_channels(),
                                                       " channels, the first one ", first.active_channels()));
      }
      if ((acq.trajectory_dimensions() == 0) != (first.trajectory_dimensions() == 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": acquisition ", i, " mixes Cartesian and non-Cartesian readouts"));
      }
    }
    if (acq.active_channels() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": acquisition ", i, " has no active channels"));
    }
    kept.push_back(std::move(acq));
  }
  if (kept.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no imaging acquisitions (", total, " in the file, ",
                                                   raw.acquisitions_skipped, " noise/navigator/phase correction)"));
  }
  raw.acquisitions_read = static_cast<int64_t>(kept.size());
  raw.coils = kept.front().active_channels();
  raw.cartesian = kept.front().trajectory_dimensions() == 0;

  if (raw.cartesian) {
    for (size_t a = 0; a < kept.size(); ++a) {
      if (kept[a].idx().slice != 0 || kept[a].idx().repetition != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": Cartesian acquisition ", a, " has slice ", kept[a].idx().slice, " repetition ",
            kept[a].idx().repetition, "; several slices or repetitions are supported for non-Cartesian data only"));
      }
    }
    auto k = MakeCfl({raw.matrix[0], raw.matrix[1], raw.matrix[2], raw.coils});
    if (!k.ok()) return k.status();
    raw.kspace = std::move(*k);
    const int64_t nx = raw.matrix[0], ny = raw.matrix[1], nz = raw.matrix[2];
    for (size_t a = 0; a < kept.size(); ++a) {
      ISMRMRD::Acquisition& acq = kept[a];
      const int64_t y = Offset(acq.idx().kspace_encode_step_1, encoding.encodingLimits.kspace_encoding_step_1, ny);
      const int64_t z = Offset(acq.idx().kspace_encode_step_2, encoding.encodingLimits.kspace_encoding_step_2, nz);
      if (y < 0 || y >= ny || z < 0 || z >= nz) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": acquisition line (", acq.idx().kspace_encode_step_1,
                                                       ", ", acq.idx().kspace_encode_step_2, ") is outside the ",
                                                       ny, " x ", nz, " encoded matrix"));
      }
      for (int c = 0; c < raw.coils; ++c) {
        for (int s = 0; s < acq.number_of_samples(); ++s) {
          const int64_t x = s - static_cast<int64_t>(acq.center_sample()) + nx / 2;
          if (x < 0 || x >= nx) continue;
          raw.kspace.data[x + nx * (y + ny * (z + nz * c))] = acq.data(s, c);
        }
      }
    }
    return raw;
  }

  absl::StatusOr<Stack> st = StackReadouts(kept, path);
  if (!st.ok()) return st.status();
  const int64_t samples = kept.front().number_of_samples(), readouts = st->readouts;
  const int64_t images = st->repetitions * st->slices;
  std::vector<int64_t> k_dims = {1, samples, readouts, raw.coils, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  k_dims[kTimeDim] = st->repetitions;
  k_dims[kSliceDim] = st->slices;
  auto k = MakeCfl(k_dims);
  auto t = MakeCfl({3, samples, readouts});
  if (!k.ok()) return k.status();
  if (!t.ok()) return t.status();
  raw.kspace = std::move(*k);
  raw.trajectory = std::move(*t);
  const bool fraction = options.trajectory_units == IsmrmrdTrajectoryUnits::kFractionOfMatrix;
  for (int64_t i = 0; i < images; ++i) {
    for (int64_t r = 0; r < readouts; ++r) {
      const size_t a = st->images[i][r];
      ISMRMRD::Acquisition& acq = kept[a];
      if (acq.number_of_samples() != samples) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": readout ", a, " has ", acq.number_of_samples(),
                                                       " samples, the first one ", samples));
      }
      const int dims = acq.trajectory_dimensions();
      if (dims < 2 || dims > 3) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": readout ", a, " has ", dims, " trajectory dimensions (2 or 3 supported)"));
      }
      for (int64_t s = 0; s < samples; ++s) {
        for (int axis = 0; axis < 3; ++axis) {
          const float scale = fraction ? static_cast<float>(raw.matrix[axis]) : 1.0f;
          const float v = axis < dims ? acq.traj(axis, s) * scale : 0.f;
          std::complex<float>& slot = raw.trajectory.data[axis + 3 * (s + samples * r)];
          if (i == 0) {
            slot = v;
          } else if (slot.real() != v) {  // the stack's one trajectory (sense_stack.h)
            return absl::InvalidArgumentError(absl::StrCat(
                path, ": readout ", a, " (slice ", i / st->repetitions, " repetition ", i % st->repetitions,
                ") has another trajectory than readout ", r, " of slice 0 repetition 0; every slice and "
                "repetition must use the same trajectory"));
          }
        }
        for (int c = 0; c < raw.coils; ++c) {
          raw.kspace.data[s + samples * (r + readouts * (c + raw.coils * i))] = acq.data(s, c);
        }
      }
    }
  }
  return raw;
}

}  // namespace

absl::StatusOr<IsmrmrdRawData> ReadIsmrmrd(const std::string& path, const IsmrmrdReadOptions& options) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  // libismrmrd reports HDF5 failures (not an HDF5 file, no such group, a
  // damaged dataset) as exceptions.
  try {
    return Read(path, options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable ISMRMRD dataset (", e.what(), ")"));
  }
}

}  // namespace tessera::recon::formats
