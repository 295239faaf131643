// Ultrasound channel data in USTB's Ultrasound File Format (.uff, UFF
// v1.x): the HDF5 layout USTB's MATLAB classes write through
// uff.write_object, read here with the HDF5 C API. The layout and the delay
// conventions follow USTB's own code (github.com/unioslo/USTB at 80ca014,
// UFF version v1.2.0): +uff/write_object.m (how objects become groups and
// datasets), +uff/channel_data.m, +uff/wave.m, +uff/point.m, +uff/probe.m,
// +uff/linear_array.m, +uff/wavefront.m and +midprocess/das.m (the transmit
// delay of each wavefront).
//
//   /                        attribute version (e.g. "v1.2.0"; not checked)
//   /channel_data            group, attribute class = "uff.channel_data" (any
//                            root group of that class is taken; "channel_data"
//                            first)
//     sampling_frequency     [1][1] (Hz)    every numeric property: a dataset
//     initial_time           [1][1] (s)     of any numeric type (MATLAB writes
//     sound_speed            [1][1] (m/s)   single), attributes class/name;
//     modulation_frequency   [1][1] (Hz)    absent: 1540 and 0 (USTB defaults)
//     data                   [frames][waves][channels][samples] (MATLAB's
//                            samples x channels x waves x frames, column-major;
//                            trailing 1s dropped): a real dataset, a group
//                            (attribute complex = 1) holding real and imag
//                            datasets of that shape, or a dataset of a compound
//                            type of two numeric members (real, imag)
//     probe                  group of class uff.linear_array (or uff.probe):
//       geometry             [7][elements]: rows x y z theta phi width height
//                            (MATLAB's elements x 7); absent: N and pitch
//                            (elements pitch apart, centred on x = 0, as
//                            uff.linear_array computes them)
//     sequence               group of class uff.wave, attribute array = 1,
//                            holding sequence_0001, sequence_0002, ... (one
//                            wave: the uff.wave group itself)
//       wavefront            [1][1] 0 plane, 1 spherical, 2 photoacoustic;
//                            optional (write_object does not dump the
//                            enumeration): absent means plane when
//                            source/distance is Inf, else spherical
//       source               uff.point group: distance, azimuth, elevation
//       delay                [1][1] (s) the wave's recording delay; absent: 0
//       sound_speed          [1][1] (m/s) must equal the channel data's
//     pulse/center_frequency optional (uff.pulse): the probe's centre frequency
//                            (absent: modulation_frequency, or fs / 4)
//
// What is accepted (everything else is INVALID_ARGUMENT naming the dataset):
//   - a linear array along x (y = z = 0 for every element);
//   - plane waves: source elevation 0, azimuth = steering angle; USTB's
//     T = (x sin az + z cos az) / c - delay, i.e. acquisition.h's plane wave
//     with d_t = delay;
//   - spherical waves from an element of the array (synthetic aperture; the
//     source within 1 um of z = 0 and 1 % of a pitch of an element): USTB's
//     T = (|r - s| + distance) / c - delay, i.e. the element's transmit with
//     d_t = delay - distance / c (0 for USTB's own STA files, which set
//     delay = distance / c);
//   - one kind per file. Diverging or focused waves (a source off the array)
//     and photoacoustic ones are refused.
// Only the first frame is read (the beamformers take one frame).
//
// Errors start with the path, as ReadUltrasoundH5's: NOT_FOUND, INVALID_ARGUMENT
// ("r.uff: /channel_data/sequence/sequence_0002/source/azimuth is missing",
// "r.uff: /channel_data/data is [3][128][2000] but the probe has 64
// elements"), DATA_LOSS when HDF5 cannot read the values (truncated file).
#ifndef TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ULTRASOUND_UFF_H_
#define TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ULTRASOUND_UFF_H_

#include <hdf5.h>

#include <string>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/ultrasound/acquisition.h"

namespace tessera::recon::formats {

absl::StatusOr<ultrasound::Acquisition> ReadUltrasoundUff(const std::string& path);

// Whether an open HDF5 file has a root group of class uff.channel_data.
bool IsUffChannelDataFile(hid_t file);

}  // namespace tessera::recon::formats

#endif  // TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ULTRASOUND_UFF_H_
