// Ultrasound channel data in HDF5, in the layout of the PICMUS challenge files
// (USTB's first "us_dataset" format), read and written:
//
//   /US/US_DATASET0000/                 group
//     data/real          float32 [transmits][channels][samples]  (HDF5 C order:
//     data/imag          float32 [transmits][channels][samples]   samples fastest,
//                                                                 = acquisition.h's layout)
//     angles             float32 [transmits]   plane-wave steering angles (rad)
//     probe_geometry     float32 [3][channels] element positions (m): rows x, y, z
//                                              ([channels][3] is read too)
//     sampling_frequency float32 [1]  (Hz)
//     initial_time       float32 [1]  (s) time of sample 0, t = 0 when the plane
//                                     wave passes the origin (acquisition.h)
//     sound_speed        float32 [1]  (m/s)
//     modulation_frequency float32 [1] (Hz) > 0: IQ data demodulated at it;
//                                     0: RF (imag all zero or absent) or analytic RF
//   Tessera additions, optional on reading (PICMUS files lack them):
//     center_frequency   float64 [1]  (Hz) transducer centre frequency; absent:
//                                     modulation_frequency, or fs / 4 when that is 0
//                                     (only the simulator uses it)
//     element_width      float64 [1]  (m)
//     transmit_elements  int32 [transmits] synthetic aperture: the element firing in
//                                     each transmit (time zero = its firing); then
//                                     `angles` is not needed
//     transmit_delays    float64 [transmits] (s) each transmit's recording delay
//                                     d_t (acquisition.h; USTB's uff.wave.delay);
//                                     absent: all 0
// Numeric datasets of any HDF5 numeric type are converted on reading; scalars
// may be stored as [1] or as HDF5 scalars. y and z of probe_geometry must be 0
// (a linear array along x).
//
// ReadUltrasoundH5 also reads USTB's later .uff files (a group of class
// uff.channel_data with a uff.wave sequence): a file without the
// /US/US_DATASET0000 group goes to ReadUltrasoundUff (ultrasound_uff.h), and
// one with neither layout is INVALID_ARGUMENT naming both.
//
// Errors start with the path: NOT_FOUND for a missing file, INVALID_ARGUMENT
// for a file that is not HDF5, a missing or mis-shaped dataset ("r.h5:
// /US/US_DATASET0000/data/real is [75][128] (expected 3 dimensions)") or
// values ValidateAcquisition rejects, DATA_LOSS when HDF5 cannot read a
// dataset's values (truncated file).
#ifndef TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ULTRASOUND_H5_H_
#define TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ULTRASOUND_H5_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/reconstruction/ultrasound/acquisition.h"

namespace tessera::recon::formats {

inline constexpr char kUltrasoundDatasetGroup[] = "/US/US_DATASET0000";

absl::StatusOr<ultrasound::Acquisition> ReadUltrasoundH5(const std::string& path);

// Writes a valid acquisition (ValidateAcquisition) in the layout above, under
// a temporary name renamed into place. RF data gets an all-zero data/imag, as
// PICMUS RF files have. Samples are float32; geometry, angles and scalars
// float64 (so they read back exactly).
absl::Status WriteUltrasoundH5(const ultrasound::Acquisition& acquisition, const std::string& path);

}  // namespace tessera::recon::formats

#endif  // TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ULTRASOUND_H5_H_
