#include "common/nifti_io.h"

#include <nifti2_io.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "common/parallel_gzip.h"
#include "common/status.h"

namespace tessera {
namespace {

static_assert(sizeof(nifti_1_header) == 348, "nifti_1_header must be 348 bytes");
static_assert(sizeof(nifti_2_header) == 540, "nifti_2_header must be 540 bytes");

// Upper bound on the voxels of one image (16 Gi elements); a header asking for
// more is treated as corrupt rather than attempting the allocation.
constexpr int64_t kMaxElements = int64_t{1} << 34;
// vox_offset beyond this is not a plausible amount of header extensions.
constexpr int64_t kMaxVoxOffset = int64_t{1} << 32;
// DEFLATE cannot expand data by more than 1032:1, so a gzip file of S bytes
// holds at most about 1032*S bytes; bigger headers are lies (or truncation).
constexpr int64_t kMaxDeflateRatio = 1032;
constexpr int64_t kIoChunk = int64_t{1} << 26;  // 64 MiB per gzread/gzwrite
constexpr char kNifti2Magic[8] = {'n', '+', '2', '\0', '\r', '\n', '\032', '\n'};

void QuietNiftiLib() {
  static std::once_flag once;
  std::call_once(once, [] { nifti_set_debug_level(0); });
}

absl::Status PathError(absl::StatusCode code, const std::string& path, absl::string_view what) {
  return absl::Status(code, absl::StrCat(path, ": ", what));
}

class GzFile {
 public:
  explicit GzFile(gzFile f) : f_(f) {}
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  ~GzFile() {
    if (f_ != nullptr) gzclose(f_);
  }
  gzFile get() const { return f_; }
  // Closes the file and returns gzclose()'s result.
  int Close() {
    int rc = gzclose(f_);
    f_ = nullptr;
    return rc;
  }

 private:
  gzFile f_;
};

// zlib's error state for `f`: Z_OK when there is none; `text` describes it.
int GzError(gzFile f, std::string* text) {
  int errnum = Z_OK;
  const char* msg = gzerror(f, &errnum);
  if (errnum == Z_ERRNO) {
    *text = std::strerror(errno);
  } else {
    *text = msg != nullptr ? msg : "";
  }
  return errnum;
}

// A file read either as is or, when it starts with the gzip magic, through
// inflate(). zlib's gzread() is not used for reading because it reports a
// gzip stream that ends early at a block boundary (e.g. a file missing only
// its 8-byte trailer) as a clean end of file; here the stream must reach its
// end (CRC-32 and length verified by inflate) or it is an error.
class InputStream {
 public:
  enum class State { kOk, kTruncated, kCorrupt, kIoError };

  InputStream() = default;
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;
  ~InputStream() {
    if (inflating_) inflateEnd(&strm_);
    if (file_ != nullptr) std::fclose(file_);
  }

  // Opens `path`; errno describes a failure.
  bool Open(const std::string& path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) return false;
    in_.resize(1 << 18);
    Refill();
    compressed_ = avail_ >= 2 && in_[next_] == 0x1f && in_[next_ + 1] == 0x8b;
    if (compressed_) {
      std::memset(&strm_, 0, sizeof(strm_));
      if (inflateInit2(&strm_, 15 + 16) != Z_OK) {
        Fail(State::kCorrupt, "cannot initialise zlib");
        return true;
      }
      inflating_ = true;
    }
    return true;
  }

  bool compressed() const { return compressed_; }
  State state() const { return state_; }
  const std::string& error() const { return error_; }

  // Reads up to `n` bytes; fewer only at the end of the input or on an error
  // (state() then says which).
  int64_t Read(void* buffer, int64_t n) {
    unsigned char* out = static_cast<unsigned char*>(buffer);
    int64_t total = 0;
    while (total < n && state_ == State::kOk && !done_) {
      if (!compressed_ && avail_ == 0 && n - total >= static_cast<int64_t>(in_.size())) {
        // Large uncompressed reads go straight into the destination.
        const size_t want = static_cast<size_t>(std::min(n - total, kIoChunk));
        const size_t got = std::fread(out + total, 1, want, file_);
        total += static_cast<int64_t>(got);
        if (got < want) {
          if (std::ferror(file_)) Fail(State::kIoError, std::strerror(errno));
          done_ = true;
        }
        continue;
      }
      if (avail_ == 0 && !Refill()) {
        if (state_ == State::kOk && compressed_ && !member_ended_) {
          Fail(State::kTruncated, "unexpected end of the compressed data");
        }
        done_ = true;
        break;
      }
      if (!compressed_) {
        const int64_t k = std::min<int64_t>(n - total, avail_);
        std::memcpy(out + total, &in_[next_], static_cast<size_t>(k));
        next_ += static_cast<size_t>(k);
        avail_ -= static_cast<size_t>(k);
        total += k;
        continue;
      }
      if (member_ended_) {
        // Another gzip member may follow; anything else is trailing data,
        // which (like gzip and zlib) we ignore.
        if (avail_ < 2 && !FillAtLeast(2)) {
          done_ = true;
          break;
        }
        if (in_[next_] != 0x1f || in_[next_ + 1] != 0x8b) {
          done_ = true;
          break;
        }
        inflateReset(&strm_);
        member_ended_ = false;
      }
      strm_.next_in = &in_[next_];
      strm_.avail_in = static_cast<uInt>(avail_);
      strm_.next_out = out + total;
      strm_.avail_out = static_cast<uInt>(std::min<int64_t>(n - total, kIoChunk));
      const uInt before_out = strm_.avail_out;
      const int rc = inflate(&strm_, Z_NO_FLUSH);
      next_ += avail_ - strm_.avail_in;
      avail_ = strm_.avail_in;
      total += before_out - strm_.avail_out;
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        Fail(State::kCorrupt, strm_.msg != nullptr ? strm_.msg : absl::StrCat("zlib error ", rc));
      }
    }
    return total;
  }

  // Reads and discards `n` bytes; returns how many there were.
  int64_t Skip(int64_t n) {
    char scratch[1 << 14];
    int64_t total = 0;
    while (total < n) {
      const int64_t got = Read(scratch, std::min<int64_t>(n - total, sizeof(scratch)));
      total += got;
      if (got == 0) break;
    }
    return total;
  }

  // For a gzip file: decodes whatever follows to the end of the stream so that
  // its trailer is verified; the state then tells whether it was complete.
  void Finish() {
    if (!compressed_) return;
    char scratch[1 << 14];
    while (state_ == State::kOk && Read(scratch, sizeof(scratch)) > 0) {
    }
  }

 private:
  void Fail(State state, std::string error) {
    state_ = state;
    error_ = std::move(error);
  }

  // Moves unread input to the front and reads more; false at end of file.
  bool Refill() {
    if (next_ > 0 && avail_ > 0) std::memmove(&in_[0], &in_[next_], avail_);
    next_ = 0;
    const size_t got = std::fread(&in_[avail_], 1, in_.size() - avail_, file_);
    if (got == 0 && std::ferror(file_)) Fail(State::kIoError, std::strerror(errno));
    avail_ += got;
    return got > 0;
  }

  bool FillAtLeast(size_t k) {
    while (avail_ < k) {
      if (!Refill()) return false;
    }
    return true;
  }

  FILE* file_ = nullptr;
  std::vector<unsigned char> in_;
  size_t next_ = 0;   // first unread byte of in_
  size_t avail_ = 0;  // unread bytes in in_
  bool compressed_ = false;
  bool inflating_ = false;
  bool member_ended_ = false;
  bool done_ = false;
  z_stream strm_;
  State state_ = State::kOk;
  std::string error_;
};

absl::StatusCode CodeFor(InputStream::State state) {
  return state == InputStream::State::kIoError ? absl::StatusCode::kUnavailable : absl::StatusCode::kDataLoss;
}

std::string StreamProblem(const InputStream& in) {
  switch (in.state()) {
    case InputStream::State::kOk: return "";
    case InputStream::State::kTruncated: return absl::StrCat("gzip: ", in.error());
    case InputStream::State::kCorrupt: return absl::StrCat("corrupt gzip stream: ", in.error());
    case InputStream::State::kIoError: return absl::StrCat("read error: ", in.error());
  }
  return "";
}

// Everything ReadNifti needs from a NIfTI-1 or NIfTI-2 header, in native byte order.
struct Header {
  int version = 0;
  int header_size = 0;
  bool swapped = false;
  int64_t dim[8] = {};
  double pixdim[8] = {};
  int datatype = 0;
  int bitpix = 0;
  double vox_offset = 0;
  double scl_slope = 0;
  double scl_inter = 0;
  int qform_code = 0;
  int sform_code = 0;
  double quatern[3] = {};
  double qoffset[3] = {};
  double srow[3][4] = {};
  int intent_code = 0;
  int xyzt_units = 0;
  std::string descrip;
};

// The two header structs share field names, so one template copies either.
template <typename H>
void CopyHeaderFields(const H& h, Header* out) {
  for (int i = 0; i < 8; ++i) {
    out->dim[i] = h.dim[i];
    out->pixdim[i] = h.pixdim[i];
  }
  out->datatype = h.datatype;
  out->bitpix = h.bitpix;
  out->vox_offset = static_cast<double>(h.vox_offset);
  out->scl_slope = h.scl_slope;
  out->scl_inter = h.scl_inter;
  out->qform_code = h.qform_code;
  out->sform_code = h.sform_code;
  out->quatern[0] = h.quatern_b;
  out->quatern[1] = h.quatern_c;
  out->quatern[2] = h.quatern_d;
  out->qoffset[0] = h.qoffset_x;
  out->qoffset[1] = h.qoffset_y;
  out->qoffset[2] = h.qoffset_z;
  for (int c = 0; c < 4; ++c) {
    out->srow[0][c] = h.srow_x[c];
    out->srow[1][c] = h.srow_y[c];
    out->srow[2][c] = h.srow_z[c];
  }
  out->intent_code = h.intent_code;
  out->xyzt_units = static_cast<unsigned char>(h.xyzt_units);
  const char* d = h.descrip;
  out->descrip.assign(d, strnlen(d, sizeof(h.descrip)));
}

int32_t ByteSwap32(int32_t v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u >> 24) | ((u >> 8) & 0xff00u) | ((u << 8) & 0xff0000u) | (u << 24);
  std::memcpy(&v, &u, 4);
  return v;
}

std::string DatatypeName(int code) {
  const char* name = nifti_datatype_string(code);
  return absl::StrCat(name != nullptr ? name : "UNKNOWN", " (", code, ")");
}

absl::StatusOr<DType> DTypeFromNifti(int code) {
  switch (code) {
    case DT_UINT8: return DType::kUInt8;
    case DT_INT8: return DType::kInt8;
    case DT_UINT16: return DType::kUInt16;
    case DT_INT16: return DType::kInt16;
    case DT_INT32: return DType::kInt32;
    case DT_FLOAT32: return DType::kFloat32;
    case DT_FLOAT64: return DType::kFloat64;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "unsupported NIfTI datatype ", DatatypeName(code),
          " (supported: UINT8, INT8, UINT16, INT16, INT32, FLOAT32, FLOAT64)"));
  }
}

int NiftiFromDType(DType t) {
  switch (t) {
    case DType::kUInt8: return DT_UINT8;
    case DType::kInt8: return DT_INT8;
    case DType::kUInt16: return DT_UINT16;
    case DType::kInt16: return DT_INT16;
    case DType::kInt32: return DT_INT32;
    case DType::kFloat32: return DT_FLOAT32;
    case DType::kFloat64: return DT_FLOAT64;
    default: return DT_UNKNOWN;
  }
}

// Intents whose components live along dim[5] ((nx, ny, nz, 1, nc) files).
bool IsVectorIntent(int code) {
  switch (code) {
    case NIFTI_INTENT_GENMATRIX:
    case NIFTI_INTENT_SYMMATRIX:
    case NIFTI_INTENT_DISPVECT:
    case NIFTI_INTENT_VECTOR:
    case NIFTI_INTENT_POINTSET:
    case NIFTI_INTENT_TRIANGLE:
    case NIFTI_INTENT_QUATERNION:
    case NIFTI_INTENT_RGB_VECTOR:
    case NIFTI_INTENT_RGBA_VECTOR:
      return true;
    default:
      return false;
  }
}

// On-disk dims -> Volume array shape (see nifti_io.h).
Shape ArrayShapeFromDims(const std::vector<int64_t>& dims) {
  Shape shape = dims;
  if (shape.size() < 3) shape.resize(3, 1);
  if (shape.size() == 5 && shape[3] == 1) shape = {shape[0], shape[1], shape[2], shape[4]};
  return shape;
}

// Reads and validates the header; leaves `f` positioned after it.
absl::StatusOr<Header> ReadHeader(InputStream& in, const std::string& path) {
  union {
    nifti_1_header n1;
    nifti_2_header n2;
    char bytes[sizeof(nifti_2_header)];
  } raw;
  std::memset(&raw, 0, sizeof(raw));

  const int64_t got = in.Read(raw.bytes, sizeof(nifti_1_header));
  if (in.state() != InputStream::State::kOk && got < 4) {
    return PathError(CodeFor(in.state()), path, StreamProblem(in));
  }
  if (got == 0) return PathError(absl::StatusCode::kInvalidArgument, path, "not a NIfTI file: the file is empty");
  if (got < 4) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("not a NIfTI file: only ", got, " bytes"));
  }

  Header h;
  int32_t sizeof_hdr;
  std::memcpy(&sizeof_hdr, raw.bytes, 4);
  if (sizeof_hdr == 348 || sizeof_hdr == 540) {
    h.version = sizeof_hdr == 348 ? 1 : 2;
  } else if (ByteSwap32(sizeof_hdr) == 348 || ByteSwap32(sizeof_hdr) == 540) {
    h.version = ByteSwap32(sizeof_hdr) == 348 ? 1 : 2;
    h.swapped = true;
  } else {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("not a NIfTI file: sizeof_hdr is ", sizeof_hdr, " (expected 348 or 540)",
                                  in.state() != InputStream::State::kOk ? "; " + StreamProblem(in) : ""));
  }
  h.header_size = h.version == 1 ? 348 : 540;

  int64_t total = got;
  if (total == 348 && h.version == 2) total += in.Read(raw.bytes + 348, 540 - 348);
  if (total < h.header_size) {
    return PathError(in.state() == InputStream::State::kIoError ? absl::StatusCode::kUnavailable
                                                                 : absl::StatusCode::kDataLoss,
                     path,
                     absl::StrCat("truncated NIfTI-", h.version, " header: got ", total, " of ", h.header_size,
                                  " bytes",
                                  in.state() != InputStream::State::kOk ? " (" + StreamProblem(in) + ")" : ""));
  }

  if (h.swapped) swap_nifti_header(&raw, h.version);

  if (h.version == 1) {
    const char* m = raw.n1.magic;
    if (std::memcmp(m, "n+1\0", 4) != 0) {
      if (std::memcmp(m, "ni1\0", 4) == 0) {
        return PathError(absl::StatusCode::kInvalidArgument, path,
                         "two-file NIfTI-1 (.hdr/.img) is not supported; convert it to .nii or .nii.gz");
      }
      return PathError(absl::StatusCode::kInvalidArgument, path,
                       absl::StrCat("no NIfTI-1 magic (found \"", absl::CHexEscape(absl::string_view(m, 4)),
                                    "\"): ANALYZE 7.5 and other formats are not supported"));
    }
    CopyHeaderFields(raw.n1, &h);
  } else {
    const char* m = raw.n2.magic;
    if (std::memcmp(m, kNifti2Magic, 8) != 0) {
      if (std::memcmp(m, "ni2\0", 4) == 0) {
        return PathError(absl::StatusCode::kInvalidArgument, path,
                         "two-file NIfTI-2 (.hdr/.img) is not supported; convert it to .nii or .nii.gz");
      }
      if (std::memcmp(m, kNifti2Magic, 4) == 0) {
        return PathError(absl::StatusCode::kDataLoss, path,
                         "NIfTI-2 magic signature is damaged (was the file transferred in text mode?)");
      }
      return PathError(absl::StatusCode::kInvalidArgument, path,
                       absl::StrCat("no NIfTI-2 magic (found \"", absl::CHexEscape(absl::string_view(m, 8)), "\")"));
    }
    CopyHeaderFields(raw.n2, &h);
  }

  // Sanity checks before anything is allocated or read.
  const int64_t ndim = h.dim[0];
  if (ndim < 1 || ndim > 7) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("bad header: dim[0] = ", ndim, " (must be 1..7)"));
  }
  for (int i = 1; i <= ndim; ++i) {
    if (h.dim[i] < 1) {
      return PathError(absl::StatusCode::kInvalidArgument, path,
                       absl::StrCat("bad header: dim[", i, "] = ", h.dim[i], " (must be positive)"));
    }
  }
  absl::StatusOr<DType> dtype = DTypeFromNifti(h.datatype);
  if (!dtype.ok()) return PathError(absl::StatusCode::kInvalidArgument, path, dtype.status().message());
  if (h.bitpix != static_cast<int>(8 * SizeOf(*dtype))) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("bad header: bitpix = ", h.bitpix, " does not match datatype ",
                                  DatatypeName(h.datatype), " (", 8 * SizeOf(*dtype), " bits)"));
  }
  Shape disk_dims(h.dim + 1, h.dim + 1 + ndim);
  absl::Status shape_ok = ValidateShape(disk_dims, kMaxElements);
  if (!shape_ok.ok()) {
    return PathError(absl::StatusCode::kInvalidArgument, path, absl::StrCat("bad header: ", shape_ok.message()));
  }
  if (!std::isfinite(h.vox_offset) || h.vox_offset < 0 || h.vox_offset > static_cast<double>(kMaxVoxOffset)) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("bad header: vox_offset = ", h.vox_offset));
  }
  return h;
}

// Index -> RAS mm affine from the header (sform, else qform, else pixdim).
Geometry GeometryFromHeader(const Header& h, const std::string& path) {
  double unit = 1.0;  // to millimetres
  switch (XYZT_TO_SPACE(h.xyzt_units)) {
    case NIFTI_UNITS_METER: unit = 1000.0; break;
    case NIFTI_UNITS_MICRON: unit = 0.001; break;
    default: break;  // mm, or unknown (taken as mm)
  }
  auto finish = [&](Mat4 m, const char* what) -> absl::StatusOr<Geometry> {
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 4; ++c) m[r * 4 + c] *= unit;
    }
    m[12] = m[13] = m[14] = 0;
    m[15] = 1;
    absl::StatusOr<Geometry> g = Geometry::FromAffine(m);
    if (!g.ok()) {
      TESSERA_LOG(WARNING) << path << ": ignoring unusable " << what << " (" << g.status().message() << ")";
    }
    return g;
  };
  double spacing[3];
  for (int i = 0; i < 3; ++i) {
    const double p = h.pixdim[i + 1];
    spacing[i] = (std::isfinite(p) && p != 0) ? p : 1.0;
  }
  if (h.sform_code > 0) {
    Mat4 m{};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 4; ++c) m[r * 4 + c] = h.srow[r][c];
    }
    absl::StatusOr<Geometry> g = finish(m, "sform");
    if (g.ok()) return *g;
  }
  if (h.qform_code > 0) {
    const double qfac = h.pixdim[0] < 0 ? -1.0 : 1.0;
    bool finite = true;
    for (int i = 0; i < 3; ++i) finite = finite && std::isfinite(h.quatern[i]) && std::isfinite(h.qoffset[i]);
    if (finite) {
      nifti_dmat44 q = nifti_quatern_to_dmat44(h.quatern[0], h.quatern[1], h.quatern[2], h.qoffset[0],
                                               h.qoffset[1], h.qoffset[2], std::abs(spacing[0]),
                                               std::abs(spacing[1]), std::abs(spacing[2]), qfac);
      Mat4 m{};
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 4; ++c) m[r * 4 + c] = q.m[r][c];
      }
      absl::StatusOr<Geometry> g = finish(m, "qform");
      if (g.ok()) return *g;
    } else {
      TESSERA_LOG(WARNING) << path << ": ignoring qform with non-finite parameters";
    }
  }
  Mat4 m{};
  for (int i = 0; i < 3; ++i) m[i * 4 + i] = spacing[i];
  absl::StatusOr<Geometry> g = finish(m, "pixdim scaling");
  return g.ok() ? *g : Geometry{};
}

template <typename T>
void ScaleInto(const T* src, int64_t n, double slope, double inter, NDArray* out) {
  if (out->dtype() == DType::kFloat64) {
    double* dst = out->data<double>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<double>(src[i]) * slope + inter;
  } else {
    float* dst = out->data<float>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<double>(src[i]) * slope + inter);
  }
}

template <typename H>
void FillHeader(H* h, const Geometry& geometry, const Mat4& affine, const NiftiWriteOptions& options,
                const std::string& description, int64_t vox_offset) {
  nifti_dmat44 r{};
  for (int row = 0; row < 4; ++row) {
    for (int c = 0; c < 4; ++c) r.m[row][c] = affine[row * 4 + c];
  }
  double qb, qc, qd, qx, qy, qz, dx, dy, dz, qfac;
  nifti_dmat44_to_quatern(r, &qb, &qc, &qd, &qx, &qy, &qz, &dx, &dy, &dz, &qfac);

  for (int i = h->dim[0] + 1; i <= 7; ++i) h->dim[i] = 1;
  h->pixdim[0] = qfac < 0 ? -1 : 1;
  for (int i = 0; i < 3; ++i) h->pixdim[i + 1] = geometry.spacing[i];
  for (int i = 4; i <= 7; ++i) h->pixdim[i] = 1;
  h->vox_offset = vox_offset;
  h->scl_slope = 1;
  h->scl_inter = 0;
  h->xyzt_units = NIFTI_UNITS_MM;
  h->intent_code = options.intent_code;
  std::memset(h->descrip, 0, sizeof(h->descrip));
  std::memcpy(h->descrip, description.data(), std::min(description.size(), sizeof(h->descrip) - 1));
  h->qform_code = options.qform_code;
  if (options.qform_code > 0) {
    h->quatern_b = qb;
    h->quatern_c = qc;
    h->quatern_d = qd;
    h->qoffset_x = qx;
    h->qoffset_y = qy;
    h->qoffset_z = qz;
  }
  h->sform_code = options.sform_code;
  if (options.sform_code > 0) {
    for (int c = 0; c < 4; ++c) {
      h->srow_x[c] = affine[c];
      h->srow_y[c] = affine[4 + c];
      h->srow_z[c] = affine[8 + c];
    }
  }
}

absl::Status ErrnoError(int err, const std::string& path, absl::string_view what) {
  if (err == 0) return PathError(absl::StatusCode::kInternal, path, what);
  absl::Status s = absl::ErrnoToStatus(err, "");
  return PathError(s.code(), path, absl::StrCat(what, ": ", std::strerror(err)));
}

// Byte order, scaling, geometry and info for the decoded voxels `data`.
absl::StatusOr<Volume> FinishVolume(NDArray data, const Header& h, DType dtype, int64_t count, const Shape& shape,
                                    const std::string& path, NiftiInfo* info) {
  if (h.swapped && SizeOf(dtype) > 1) {
    nifti_swap_Nbytes(count, static_cast<int>(SizeOf(dtype)), data.raw_data());
  }

  const bool scaled = std::isfinite(h.scl_slope) && h.scl_slope != 0 &&
                      (h.scl_slope != 1 || (std::isfinite(h.scl_inter) && h.scl_inter != 0));
  if (scaled) {
    const double inter = std::isfinite(h.scl_inter) ? h.scl_inter : 0.0;
    const DType out_type = dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    absl::StatusOr<NDArray> out = NDArray::Allocate(shape, out_type);
    if (!out.ok()) return Annotate(out.status(), path);
    VisitDType(dtype, [&](auto tag) {
      using T = decltype(tag);
      ScaleInto(data.data<T>(), count, h.scl_slope, inter, &*out);
    });
    data = *std::move(out);
  }

  Volume volume;
  volume.data = std::move(data);
  volume.geometry = GeometryFromHeader(h, path);
  volume.description = h.descrip;
  if (info != nullptr) {
    info->version = h.version;
    info->qform_code = h.qform_code;
    info->sform_code = h.sform_code;
    info->intent_code = h.intent_code;
    info->on_disk_dtype = h.datatype;
    info->dims.assign(h.dim + 1, h.dim + 1 + h.dim[0]);
    info->scl_slope = h.scl_slope;
    info->scl_inter = h.scl_inter;
  }
  return volume;
}

// The whole (compressed) file mapped read-only (MAP_POPULATE: one pass over
// the page cache instead of a fault or a copy per page), or an empty view when
// it cannot be mapped; the caller's streaming reader then reports the problem.
class MappedFile {
 public:
  MappedFile(const std::string& path, int64_t size) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || size <= 0) {
      if (fd >= 0) close(fd);
      return;
    }
    void* p = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return;
    data_ = p;
    size_ = static_cast<size_t>(size);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  absl::string_view view() const { return absl::string_view(static_cast<const char*>(data_), size_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// The single-threaded zlib writer (kept for comparisons): `tmp` is removed by
// the caller on failure.
absl::Status WriteWithZlib(const std::string& tmp, const std::string& path, bool compress, int level,
                           const std::string& header_bytes, const NDArray& array) {
  errno = 0;
  GzFile file(gzopen(tmp.c_str(), (compress ? absl::StrCat("wb", level) : std::string("wbT")).c_str()));
  if (file.get() == nullptr) return ErrnoError(errno, path, "cannot create file");
  gzbuffer(file.get(), 1 << 18);
  auto fail = [&](absl::string_view what) {
    std::string zerr;
    GzError(file.get(), &zerr);
    const int err = errno;
    file.Close();
    absl::Status s = ErrnoError(err, path, what);
    return zerr.empty() ? s : absl::Status(s.code(), absl::StrCat(s.message(), " (", zerr, ")"));
  };
  if (gzwrite(file.get(), header_bytes.data(), static_cast<unsigned>(header_bytes.size())) !=
      static_cast<int>(header_bytes.size())) {
    return fail("cannot write the header");
  }
  const char* p = static_cast<const char*>(array.raw_data());
  const int64_t nbytes = static_cast<int64_t>(array.nbytes());
  for (int64_t done = 0; done < nbytes;) {
    const unsigned n = static_cast<unsigned>(std::min(nbytes - done, kIoChunk));
    if (gzwrite(file.get(), p + done, n) != static_cast<int>(n)) return fail("cannot write the voxel data");
    done += n;
  }
  errno = 0;
  const int rc = file.Close();
  if (rc != Z_OK) {
    const int err = errno;
    return ErrnoError(err, path, absl::StrCat("cannot finish writing the file (zlib error ", rc, ")"));
  }
  return absl::OkStatus();
}

absl::Status WriteWithLibdeflate(const std::string& tmp, const std::string& path, bool compress, int level,
                                 int64_t member_bytes, const std::string& header_bytes, const NDArray& array) {
  errno = 0;
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (file == nullptr) return ErrnoError(errno, path, "cannot create file");
  const absl::string_view voxels(static_cast<const char*>(array.raw_data()), array.nbytes());
  if (compress) {
    GzipWriteOptions gzip;
    gzip.level = level;
    gzip.member_bytes = member_bytes;
    // The header is a member of its own, so every data member decodes
    // straight into the voxel array on reading.
    absl::Status s = WriteGzipMembers(file.get(), {header_bytes, voxels}, gzip);
    if (!s.ok()) return PathError(s.code(), path, absl::StrCat("cannot write the file: ", s.message()));
  } else {
    for (absl::string_view part : {absl::string_view(header_bytes), voxels}) {
      errno = 0;
      if (std::fwrite(part.data(), 1, part.size(), file.get()) != part.size()) {
        return ErrnoError(errno, path, "cannot write the voxel data");
      }
    }
  }
  errno = 0;
  if (std::fclose(file.release()) != 0) return ErrnoError(errno, path, "cannot finish writing the file");
  return absl::OkStatus();
}

// Why displacement fields get a faster level: their float32 mantissas are
// nearly incompressible, so higher levels buy little size for much time.
// Measured (bench/results/2026-12-01-cpu-nifti-io.md, 181x217x181x3 smooth
// float32 field, one thread): libdeflate level 1 writes in 0.84 s vs 1.06 s at
// level 6 (zlib level 6: 2.58 s) for a file of the same size (76.73 vs
// 76.79 MB, 90% of raw); images (27% of raw) keep level 6, where it pays.
int GzipLevelFor(const NiftiWriteOptions& options) {
  if (options.gzip_level != kNiftiGzipLevelAuto) return options.gzip_level;
  return IsVectorIntent(options.intent_code) ? kNiftiFieldGzipLevel : kNiftiImageGzipLevel;
}

}  // namespace

absl::StatusOr<Volume> ReadNifti(const std::string& path, NiftiInfo* info) {
  return ReadNifti(path, NiftiReadOptions(), info);
}

absl::StatusOr<Volume> ReadNifti(const std::string& path, const NiftiReadOptions& options, NiftiInfo* info) {
  QuietNiftiLib();
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return PathError(absl::StatusCode::kNotFound, path, "no such file");
    return ErrnoError(err, path, "cannot access file");
  }
  if (S_ISDIR(st.st_mode)) return PathError(absl::StatusCode::kInvalidArgument, path, "is a directory");
  if (!S_ISREG(st.st_mode)) return PathError(absl::StatusCode::kInvalidArgument, path, "is not a regular file");

  errno = 0;
  InputStream in;
  if (!in.Open(path)) return ErrnoError(errno, path, "cannot open file");

  TESSERA_ASSIGN_OR_RETURN(Header h, ReadHeader(in, path));
  const DType dtype = *DTypeFromNifti(h.datatype);  // validated by ReadHeader
  const std::vector<int64_t> disk_dims(h.dim + 1, h.dim + 1 + h.dim[0]);
  const int64_t count = NumElements(disk_dims);
  const int64_t nbytes = count * static_cast<int64_t>(SizeOf(dtype));
  const int64_t offset = std::max<int64_t>(static_cast<int64_t>(h.vox_offset), h.header_size);
  const int64_t file_size = st.st_size;

  if (!in.compressed() && file_size < offset + nbytes) {
    return PathError(absl::StatusCode::kDataLoss, path,
                     absl::StrCat("data truncated: expected ", nbytes, " bytes of voxel data at offset ", offset,
                                  ", but the file has only ", std::max<int64_t>(file_size - offset, 0)));
  }
  if (in.compressed() && nbytes / kMaxDeflateRatio > file_size + (int64_t{1} << 16)) {
    return PathError(absl::StatusCode::kDataLoss, path,
                     absl::StrCat("data truncated: expected ", nbytes, " bytes of voxel data, more than a ",
                                  file_size, "-byte gzip file can hold"));
  }

  const Shape shape = ArrayShapeFromDims(disk_dims);
  absl::StatusOr<NDArray> allocated = NDArray::Allocate(shape, dtype);
  if (!allocated.ok()) return Annotate(allocated.status(), path);
  NDArray data = *std::move(allocated);

  // Files we wrote (size-tagged members) are decoded by libdeflate in
  // parallel straight into the array: 2-10x faster than inflate() (bench/
  // results/2026-12-01-cpu-nifti-io.md). Other gzip files stay on inflate():
  // libdeflate must decode a single member into one buffer that starts with
  // the header, and that extra buffer and copy cost what it saved. Anything
  // libdeflate does not decode cleanly goes through the streaming path below,
  // which names the damage.
  if (in.compressed() && options.libdeflate &&
      (offset + nbytes) / kMaxDeflateRatio <= file_size + (int64_t{1} << 16)) {
    const MappedFile gz(path, file_size);
    if (HasMemberSizeField(gz.view()) &&
        InflateGzipRange(gz.view(), offset, offset + nbytes, data.raw_data()).ok()) {
      return FinishVolume(std::move(data), h, dtype, count, shape, path, info);
    }
  }
  const int64_t gap = offset - h.header_size;
  if (in.Skip(gap) < gap) {
    return PathError(in.state() == InputStream::State::kOk ? absl::StatusCode::kDataLoss : CodeFor(in.state()),
                     path,
                     absl::StrCat("data truncated: the file ends before the voxel data at offset ", offset,
                                  in.state() != InputStream::State::kOk ? " (" + StreamProblem(in) + ")" : ""));
  }
  const int64_t got = in.Read(data.raw_data(), nbytes);
  if (got < nbytes) {
    if (in.state() == InputStream::State::kCorrupt || in.state() == InputStream::State::kIoError) {
      return PathError(CodeFor(in.state()), path,
                       absl::StrCat(StreamProblem(in), " (after ", got, " of ", nbytes, " bytes of voxel data)"));
    }
    return PathError(absl::StatusCode::kDataLoss, path,
                     absl::StrCat("data truncated: expected ", nbytes, " bytes of voxel data, got ", got,
                                  in.state() != InputStream::State::kOk ? " (" + StreamProblem(in) + ")" : ""));
  }
  // Decode to the end of the gzip stream so that its CRC-32 and length are
  // checked; bytes after the voxel data, if any, are allowed.
  in.Finish();
  if (in.state() != InputStream::State::kOk) {
    return PathError(CodeFor(in.state()), path,
                     absl::StrCat("gzip stream damaged after the voxel data: ", StreamProblem(in)));
  }
  return FinishVolume(std::move(data), h, dtype, count, shape, path, info);
}

absl::Status WriteNifti(const Volume& volume, const std::string& path, const NiftiWriteOptions& options) {
  QuietNiftiLib();
  const NDArray& array = volume.data;
  const bool compress = absl::EndsWith(path, ".nii.gz");
  if (!compress && !absl::EndsWith(path, ".nii")) {
    return PathError(absl::StatusCode::kInvalidArgument, path, "file name must end in .nii or .nii.gz");
  }
  if (array.empty()) return PathError(absl::StatusCode::kInvalidArgument, path, "volume has no data");
  if (array.memory_kind() == MemoryKind::kDevice) {
    return PathError(absl::StatusCode::kFailedPrecondition, path, "volume data must be on the host to be written");
  }
  const int datatype = NiftiFromDType(array.dtype());
  if (datatype == DT_UNKNOWN) {
    return PathError(absl::StatusCode::kInvalidArgument, path, "volume has an invalid dtype");
  }
  if (array.rank() < 1 || array.rank() > 7) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("cannot write a rank-", array.rank(), " array (NIfTI holds 1 to 7 dims)"));
  }
  if (options.version != 1 && options.version != 2) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("NIfTI version must be 1 or 2, not ", options.version));
  }

  std::vector<int64_t> dims = array.shape();
  if (dims.size() < 3) dims.resize(3, 1);
  if (dims.size() == 4 && IsVectorIntent(options.intent_code)) dims = {dims[0], dims[1], dims[2], 1, dims[3]};
  int version = options.version;
  for (int64_t d : dims) {
    if (d < 1) {
      return PathError(absl::StatusCode::kInvalidArgument, path,
                       absl::StrCat("cannot write an empty array of shape ", ShapeToString(array.shape())));
    }
    if (d > std::numeric_limits<int16_t>::max()) version = 2;
  }
  const int64_t int_max = version == 1 ? std::numeric_limits<int16_t>::max() : std::numeric_limits<int32_t>::max();
  for (int code : {options.qform_code, options.sform_code, options.intent_code}) {
    if (code < 0 || code > int_max) {
      return PathError(absl::StatusCode::kInvalidArgument, path,
                       absl::StrCat("qform/sform/intent code ", code, " out of range for NIfTI-", version));
    }
  }

  const Geometry& g = volume.geometry;
  for (int i = 0; i < 3; ++i) {
    if (!(std::isfinite(g.spacing[i]) && g.spacing[i] > 0) || !std::isfinite(g.origin[i])) {
      return PathError(absl::StatusCode::kInvalidArgument, path,
                       absl::StrCat("bad geometry: spacing and origin must be finite and spacing positive (",
                                    g.spacing[0], ", ", g.spacing[1], ", ", g.spacing[2], ")"));
    }
  }
  for (double v : g.direction) {
    if (!std::isfinite(v)) {
      return PathError(absl::StatusCode::kInvalidArgument, path, "bad geometry: non-finite direction");
    }
  }
  const Mat4 affine = g.IndexToWorld();
  if (!InvertAffine(affine).ok()) {
    return PathError(absl::StatusCode::kInvalidArgument, path, "bad geometry: singular direction matrix");
  }

  int64_t dim8[8] = {static_cast<int64_t>(dims.size()), 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < dims.size(); ++i) dim8[i + 1] = dims[i];
  std::string header_bytes;
  if (version == 1) {
    std::unique_ptr<nifti_1_header, void (*)(void*)> h(nifti_make_new_n1_header(dim8, datatype), &std::free);
    if (h == nullptr) return PathError(absl::StatusCode::kInternal, path, "cannot create a NIfTI-1 header");
    FillHeader(h.get(), g, affine, options, volume.description, 352);
    header_bytes.assign(reinterpret_cast<const char*>(h.get()), sizeof(nifti_1_header));
  } else {
    std::unique_ptr<nifti_2_header, void (*)(void*)> h(nifti_make_new_n2_header(dim8, datatype), &std::free);
    if (h == nullptr) return PathError(absl::StatusCode::kInternal, path, "cannot create a NIfTI-2 header");
    FillHeader(h.get(), g, affine, options, volume.description, 544);
    header_bytes.assign(reinterpret_cast<const char*>(h.get()), sizeof(nifti_2_header));
  }
  header_bytes.append(4, '\0');  // extender: no extensions

  const int level = GzipLevelFor(options);
  const int max_level = options.gzip_writer == NiftiGzipWriter::kZlib ? 9 : 12;
  if (compress && (level < 1 || level > max_level)) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("gzip_level must be 1..", max_level, " (or kNiftiGzipLevelAuto), not ", level));
  }
  // Atomic only (no fsync), as this writer has always been: volumes run to
  // hundreds of MB.
  return WriteFileAtomically(path, [&](const std::string& tmp) {
    return options.gzip_writer == NiftiGzipWriter::kZlib
               ? WriteWithZlib(tmp, path, compress, level, header_bytes, array)
               : WriteWithLibdeflate(tmp, path, compress, level, options.gzip_member_bytes, header_bytes, array);
  });
}

}  // namespace tessera

namespace tessera {

absl::StatusOr<std::vector<int64_t>> ReadNiftiHeaderDims(const std::string& path) {
  int version = 0;
  std::unique_ptr<void, decltype(&std::free)> header(nifti_read_header(path.c_str(), &version, /*check=*/1),
                                                     &std::free);
  if (header == nullptr || (version != 1 && version != 2)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable NIfTI header"));
  }
  const auto dim = [&](int d) -> int64_t {
    return version == 1 ? static_cast<const nifti_1_header*>(header.get())->dim[d]
                        : static_cast<const nifti_2_header*>(header.get())->dim[d];
  };
  const int64_t rank = dim(0);
  if (rank < 1 || rank > 7) return absl::InvalidArgumentError(absl::StrCat(path, ": dim[0] is ", rank));
  std::vector<int64_t> dims;
  for (int d = 1; d <= rank; ++d) {
    if (dim(d) < 1) return absl::InvalidArgumentError(absl::StrCat(path, ": dimension ", d, " is ", dim(d)));
    dims.push_back(dim(d));
  }
  return dims;
}

}  // namespace tessera
