#include "services/som/atlas.h"

#include <fcntl.h>
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
#include <system_error>
#include <utility>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "common/status.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "kernels/som/bmu.h"
#include "kernels/som/half.h"
#include "common/sha256.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "atlas files are little-endian; this code copies host memory as is"
#endif

namespace tessera {
namespace som {
namespace {

constexpr char kFormat[] = "tessera-som-atlas";
// Version 2: the manifest records each file's SHA-256 and the codebook layout.
// Version 1 recorded a CRC-32 of each whole file; for the two binary files,
// which end in a CRC-32 of their data, that is the CRC-32 "residue" 558161692
// whatever the data, so it could not detect a consistent replacement of
// data and trailer. Version 1 atlases still load (see LoadAtlas).
constexpr int kVersion = 2;
constexpr int kOldestReadableVersion = 1;
constexpr char kManifest[] = "manifest.json";
constexpr char kCodebook[] = "codebook.f32";
constexpr char kBmu[] = "bmu.i32";
constexpr char kFeatures[] = "features.txt";
constexpr char kDocuments[] = "documents.txt";
// The manifest's last field: the CRC-32 of every byte before it.
constexpr char kManifestCrcKey[] = "\"manifest_crc32\": ";

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

// zlib's crc32 takes 32-bit lengths: feed big buffers in pieces.
uint32_t Crc32(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {
    const uInt n = static_cast<uInt>(std::min<size_t>(size, size_t{1} << 30));
    crc = static_cast<uint32_t>(crc32(crc, p, n));
    p += n;
    size -= n;
  }
  return crc;
}

std::string JoinPath(absl::string_view dir, absl::string_view name) { return absl::StrCat(dir, "/", name); }

absl::Status ErrnoError(int err, absl::string_view what, absl::string_view path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
}

// ---------------------------------------------------------------- writing

// The manifest is ordered as written (not sorted by key) so that it reads
// top-down; a non-finite double is written as null (nlohmann's rule), which
// LoadAtlas reads back as NaN.
using Json = nlohmann::ordered_json;

Json OptionsJson(const TrainOptions& o) {
  return Json{{"backend", std::string(BackendName(o.backend))},
              {"gpu_ordinal", o.gpu_ordinal},
              {"weight_type", WeightTypeName(o.weight_type)},
              {"init", InitMethodName(o.init)},
              {"pca_sample_rows", o.pca_sample_rows},
              {"pca_iterations", o.pca_iterations},
              {"seed", absl::StrCat(o.seed)},  // uint64: beyond a double's integers
              {"max_epochs", o.max_epochs},
              {"radius_start", o.radius_start},
              {"radius_end", o.radius_end},
              {"radius_decay_epochs", o.radius_decay_epochs},
              {"cooling", o.cooling == RadiusCooling::kLinear ? "linear" : "exponential"},
              {"radius_schedule", RadiusScheduleName(o.radius_schedule)},
              {"blur_passes", o.blur_passes},
              {"convergence_tolerance", o.convergence_tolerance},
              {"convergence_patience", o.convergence_patience},
              {"small_radius", o.small_radius},
              {"update_slab_bytes", o.update_slab_bytes},
              {"bmu_algorithm", BmuAlgorithmName(o.bmu_algorithm)}};
}

Json QualityJson(const QualityMetrics& q) {
  return Json{{"docs", q.docs},
              {"qe_euclidean", q.qe_euclidean},
              {"qe_cosine", q.qe_cosine},
              {"topographic_error", q.topographic_error},
              {"dead_units", q.dead_units},
              {"dead_unit_fraction", q.dead_unit_fraction}};
}

Json EpochJson(const EpochReport& r) {
  return Json{{"epoch", r.epoch},
              {"radius", r.radius},
              {"box_half_width", r.box_half_width},
              {"tap_weight", r.tap_weight},
              {"qe", r.qe},
              {"qe_relative_change", r.qe_relative_change},
              {"topographic_error", r.topographic_error},
              {"bmu_seconds", r.bmu_seconds},
              {"update_seconds", r.update_seconds},
              {"seconds", r.seconds}};
}

struct FileEntry {
  std::string name;
  int64_t bytes = 0;
  std::string sha256;  // version 2: hex digest of the whole file
  uint32_t crc = 0;    // version 1: CRC-32 of the whole file
};

// The codebook's byte layout, spelled out in the manifest so that tools
// reading codebook.f32 without this code get the index right.
Json CodebookLayoutJson() {
  return Json{{"order", "feature-major"},
              {"element", "float32, little-endian (fp16 maps are stored widened, exactly)"},
              {"index", "weight of feature f at node n = element [f * nodes + n], nodes = width * height, "
                        "node n = cell (x, y) = (n % width, n / width)"},
              {"trailer", "4 bytes after the features * nodes elements: little-endian CRC-32 (zlib) of "
                          "the elements' bytes"}};
}

constexpr char kBmuLayout[] =
    "int32 little-endian, element [d] = node of training document d (line d of documents.txt), "
    "then 4 bytes: little-endian CRC-32 (zlib) of the elements' bytes";

std::string ManifestJson(const Atlas& a, const std::vector<FileEntry>& files) {
  Json history = Json::array();
  for (const EpochReport& r : a.history) history.push_back(EpochJson(r));
  Json file_list = Json::object();
  for (const FileEntry& f : files) file_list[f.name] = Json{{"bytes", f.bytes}, {"sha256", f.sha256}};
  Json m{{"format", kFormat},
         {"version", kVersion},
         {"grid",
          {{"width", a.model.grid.width},
           {"height", a.model.grid.height},
           {"topology", TopologyName(a.model.grid.topology)}}},
         {"features", a.model.features},
         {"documents", static_cast<int64_t>(a.bmu.size())},
         {"weight_type", WeightTypeName(a.model.type)},
         {"codebook_layout", CodebookLayoutJson()},
         {"bmu_layout", kBmuLayout},
         {"options", OptionsJson(a.options)},
         {"epochs", a.epochs},
         {"converged", a.converged},
         {"final_quality", QualityJson(a.final_quality)},
         {"held_out_quality", QualityJson(a.held_out_quality)},
         {"history", std::move(history)},
         {"created", a.created}};
  if (!a.job_id.empty()) m["job_id"] = a.job_id;
  m["files"] = std::move(file_list);
  // The CRC field must come last and cover every byte before it: close the
  // object by hand. Bytes that are not UTF-8 become U+FFFD instead of throwing.
  std::string text = m.dump(2, ' ', false, Json::error_handler_t::replace);
  text.resize(text.size() - 2);  // "\n}"
  absl::StrAppend(&text, ",\n  ", kManifestCrcKey);
  const uint32_t crc = Crc32(Crc32(0, nullptr, 0), text.data(), text.size());
  absl::StrAppend(&text, crc, "\n}\n");
  return text;
}

std::string LinesText(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& line : lines) absl::StrAppend(&s, line, "\n");
  return s;
}

absl::Status CheckNames(const std::vector<std::string>& names, const char* what) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].find_first_of("\n\r") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("atlas: ", what, " ", i, " contains a line break"));
    }
  }
  return absl::OkStatus();
}

// Sizes and contents every atlas must satisfy (MakeAtlas and SaveAtlas).
absl::Status CheckAtlas(const Atlas& a) {
  const SomModel& m = a.model;
  if (m.grid.width <= 0 || m.grid.height <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("atlas: bad grid ", m.grid.width, "x", m.grid.height));
  }
  if (m.features <= 0) return absl::InvalidArgumentError("atlas: the map has no features");
  const size_t weights = static_cast<size_t>(m.features) * static_cast<size_t>(m.grid.nodes());
  if (m.weights_f32.size() != weights) {
    return absl::InvalidArgumentError(absl::StrCat("atlas: ", m.weights_f32.size(), " fp32 weights, expected ",
                                                   m.features, " x ", m.grid.nodes()));
  }
  if (m.type == WeightType::kFloat16 && m.weights_f16.size() != weights) {
    return absl::InvalidArgumentError(absl::StrCat("atlas: ", m.weights_f16.size(), " fp16 weights, expected ",
                                                   weights));
  }
  if (a.feature_names.size() != static_cast<size_t>(m.features)) {
    return absl::InvalidArgumentError(
        absl::StrCat("atlas: ", a.feature_names.size(), " feature names for ", m.features, " features"));
  }
  if (a.document_ids.size() != a.bmu.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("atlas: ", a.document_ids.size(), " document ids for ", a.bmu.size(), " BMUs"));
  }
  if (a.bmu.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError("atlas: too many documents");
  }
  const int64_t nodes = m.grid.nodes();
  for (size_t d = 0; d < a.bmu.size(); ++d) {
    if (a.bmu[d] < 0 || a.bmu[d] >= nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("atlas: document ", d, " has BMU ", a.bmu[d], ", outside the ", nodes, "-node map"));
    }
  }
  TESSERA_RETURN_IF_ERROR(CheckNames(a.feature_names, "feature name"));
  TESSERA_RETURN_IF_ERROR(CheckNames(a.document_ids, "document id"));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- reading

absl::Status Loss(absl::string_view path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("atlas file ", path, ": ", what));
}

// Strict field access on the parsed manifest: every field we write must be
// there with the type we write.
class Fields {
 public:
  Fields(const Struct& s, std::string where, std::string path) : s_(s), where_(std::move(where)), path_(std::move(path)) {}

  absl::StatusOr<const Value*> Get(const std::string& key, Value::KindCase kind, const char* type) const {
    auto it = s_.fields().find(key);
    if (it == s_.fields().end()) return Loss(path_, absl::StrCat("missing field ", where_, key));
    if (it->second.kind_case() != kind) {
      return Loss(path_, absl::StrCat("field ", where_, key, " is not ", type));
    }
    return &it->second;
  }
  absl::StatusOr<double> Double(const std::string& key) const {
    auto it = s_.fields().find(key);
    if (it != s_.fields().end() && it->second.kind_case() == Value::kNullValue) {
      return std::numeric_limits<double>::quiet_NaN();  // written for a non-finite value
    }
    TESSERA_ASSIGN_OR_RETURN(const Value* v, Get(key, Value::kNumberValue, "a number"));
    return v->number_value();
  }
  absl::StatusOr<int64_t> Int(const std::string& key, int64_t lo = std::numeric_limits<int32_t>::min(),
                              int64_t hi = std::numeric_limits<int32_t>::max()) const {
    TESSERA_ASSIGN_OR_RETURN(const Value* v, Get(key, Value::kNumberValue, "a number"));
    const double d = v->number_value();
    if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) || d != std::floor(d)) {
      return Loss(path_, absl::StrCat("field ", where_, key, " = ", d, " is not an integer in [", lo, ", ", hi, "]"));
    }
    return static_cast<int64_t>(d);
  }
  absl::StatusOr<std::string> String(const std::string& key) const {
    TESSERA_ASSIGN_OR_RETURN(const Value* v, Get(key, Value::kStringValue, "a string"));
    return v->string_value();
  }
  absl::StatusOr<bool> Bool(const std::string& key) const {
    TESSERA_ASSIGN_OR_RETURN(const Value* v, Get(key, Value::kBoolValue, "a boolean"));
    return v->bool_value();
  }
  absl::StatusOr<Fields> Object(const std::string& key) const {
    TESSERA_ASSIGN_OR_RETURN(const Value* v, Get(key, Value::kStructValue, "an object"));
    return Fields(v->struct_value(), absl::StrCat(where_, key, "."), path_);
  }
  absl::StatusOr<const ListValue*> List(const std::string& key) const {
    TESSERA_ASSIGN_OR_RETURN(const Value* v, Get(key, Value::kListValue, "a list"));
    return &v->list_value();
  }
  bool Has(const std::string& key) const { return s_.fields().count(key) > 0; }
  const Struct& raw() const { return s_; }
  const std::string& where() const { return where_; }
  const std::string& path() const { return path_; }

 private:
  const Struct& s_;
  std::string where_;
  std::string path_;
};

// An enum from its name among `values` (named by `name_of`).
template <typename E, typename NameFn>
absl::StatusOr<E> ParseEnum(const Fields& f, const std::string& key, std::initializer_list<E> values, NameFn name_of) {
  TESSERA_ASSIGN_OR_RETURN(std::string s, f.String(key));
  for (E e : values) {
    if (s == absl::string_view(name_of(e))) return e;
  }
  return Loss(f.path(), absl::StrCat("field ", f.where(), key, " has unknown value \"", s, "\""));
}

absl::StatusOr<TrainOptions> ParseOptions(const Fields& f) {
  TrainOptions o;
  TESSERA_ASSIGN_OR_RETURN(o.backend, ParseEnum<Backend>(f, "backend", {Backend::kCpu, Backend::kCuda},
                                                         [](Backend b) { return std::string(BackendName(b)); }));
  TESSERA_ASSIGN_OR_RETURN(int64_t gpu, f.Int("gpu_ordinal", 0));
  o.gpu_ordinal = static_cast<int>(gpu);
  TESSERA_ASSIGN_OR_RETURN(o.weight_type, ParseEnum<WeightType>(f, "weight_type",
                                                                {WeightType::kFloat32, WeightType::kFloat16},
                                                                WeightTypeName));
  TESSERA_ASSIGN_OR_RETURN(o.init, ParseEnum<InitMethod>(f, "init", {InitMethod::kPca, InitMethod::kRandom},
                                                         InitMethodName));
  TESSERA_ASSIGN_OR_RETURN(o.pca_sample_rows, f.Int("pca_sample_rows", 0, int64_t{1} << 53));
  TESSERA_ASSIGN_OR_RETURN(int64_t pca_iterations, f.Int("pca_iterations"));
  o.pca_iterations = static_cast<int>(pca_iterations);
  TESSERA_ASSIGN_OR_RETURN(std::string seed, f.String("seed"));
  if (!absl::SimpleAtoi(seed, &o.seed)) return Loss(f.path(), absl::StrCat("field options.seed \"", seed, "\""));
  TESSERA_ASSIGN_OR_RETURN(int64_t max_epochs, f.Int("max_epochs"));
  o.max_epochs = static_cast<int>(max_epochs);
  TESSERA_ASSIGN_OR_RETURN(o.radius_start, f.Double("radius_start"));
  TESSERA_ASSIGN_OR_RETURN(o.radius_end, f.Double("radius_end"));
  TESSERA_ASSIGN_OR_RETURN(int64_t decay, f.Int("radius_decay_epochs"));
  o.radius_decay_epochs = static_cast<int>(decay);
  TESSERA_ASSIGN_OR_RETURN(o.cooling, ParseEnum<RadiusCooling>(
                                          f, "cooling", {RadiusCooling::kExponential, RadiusCooling::kLinear},
                                          [](RadiusCooling c) { return c == RadiusCooling::kLinear ? "linear" : "exponential"; }));
  // Absent in atlases trained before the schedule reached radius_end in the
  // last decay epoch: they were trained with the legacy one.
  o.radius_schedule = RadiusSchedule::kLegacy;
  if (f.Has("radius_schedule")) {
    TESSERA_ASSIGN_OR_RETURN(o.radius_schedule,
                             ParseEnum<RadiusSchedule>(f, "radius_schedule",
                                                       {RadiusSchedule::kNarrow, RadiusSchedule::kEndAtLastDecayEpoch,
                                                        RadiusSchedule::kLegacy},
                                                       RadiusScheduleName));
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t passes, f.Int("blur_passes"));
  o.blur_passes = static_cast<int>(passes);
  TESSERA_ASSIGN_OR_RETURN(o.convergence_tolerance, f.Double("convergence_tolerance"));
  TESSERA_ASSIGN_OR_RETURN(int64_t patience, f.Int("convergence_patience"));
  o.convergence_patience = static_cast<int>(patience);
  TESSERA_ASSIGN_OR_RETURN(o.small_radius, f.Double("small_radius"));
  TESSERA_ASSIGN_OR_RETURN(o.update_slab_bytes, f.Int("update_slab_bytes", 0, int64_t{1} << 53));
  TESSERA_ASSIGN_OR_RETURN(
      o.bmu_algorithm,
      ParseEnum<BmuAlgorithm>(f, "bmu_algorithm",
                              {BmuAlgorithm::kFeatureMajor, BmuAlgorithm::kNodeMajor, BmuAlgorithm::kCusparseRowOrder,
                               BmuAlgorithm::kCusparseColOrder},
                              BmuAlgorithmName));
  return o;
}

absl::StatusOr<QualityMetrics> ParseQuality(const Fields& f) {
  QualityMetrics q;
  TESSERA_ASSIGN_OR_RETURN(q.docs, f.Int("docs", 0, int64_t{1} << 53));
  TESSERA_ASSIGN_OR_RETURN(q.qe_euclidean, f.Double("qe_euclidean"));
  TESSERA_ASSIGN_OR_RETURN(q.qe_cosine, f.Double("qe_cosine"));
  TESSERA_ASSIGN_OR_RETURN(q.topographic_error, f.Double("topographic_error"));
  TESSERA_ASSIGN_OR_RETURN(q.dead_units, f.Int("dead_units", 0, int64_t{1} << 53));
  TESSERA_ASSIGN_OR_RETURN(q.dead_unit_fraction, f.Double("dead_unit_fraction"));
  return q;
}

absl::StatusOr<EpochReport> ParseEpoch(const Fields& f) {
  EpochReport r;
  TESSERA_ASSIGN_OR_RETURN(int64_t epoch, f.Int("epoch", 0));
  r.epoch = static_cast<int>(epoch);
  TESSERA_ASSIGN_OR_RETURN(r.radius, f.Double("radius"));
  TESSERA_ASSIGN_OR_RETURN(int64_t box, f.Int("box_half_width"));
  r.box_half_width = static_cast<int>(box);
  TESSERA_ASSIGN_OR_RETURN(r.tap_weight, f.Double("tap_weight"));
  TESSERA_ASSIGN_OR_RETURN(r.qe, f.Double("qe"));
  TESSERA_ASSIGN_OR_RETURN(r.qe_relative_change, f.Double("qe_relative_change"));
  TESSERA_ASSIGN_OR_RETURN(r.topographic_error, f.Double("topographic_error"));
  TESSERA_ASSIGN_OR_RETURN(r.bmu_seconds, f.Double("bmu_seconds"));
  TESSERA_ASSIGN_OR_RETURN(r.update_seconds, f.Double("update_seconds"));
  TESSERA_ASSIGN_OR_RETURN(r.seconds, f.Double("seconds"));
  return r;
}

// An open file whose size matches the manifest.
class InFile {
 public:
  ~InFile() {
    if (fd_ >= 0) close(fd_);
  }
  absl::Status Open(const std::string& path, int64_t expected_bytes) {
    path_ = path;
    fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      if (errno == ENOENT) return Loss(path, "missing (the manifest lists it)");
      return ErrnoError(errno, "cannot open atlas file", path);
    }
    struct stat st;
    if (fstat(fd_, &st) != 0) return ErrnoError(errno, "cannot stat atlas file", path);
    if (st.st_size != expected_bytes) {
      return Loss(path, absl::StrCat(st.st_size < expected_bytes ? "truncated: " : "too long: ", st.st_size,
                                     " bytes, the manifest says ", expected_bytes));
    }
    return absl::OkStatus();
  }
  // Reads exactly `size` bytes, updating the running CRC.
  absl::Status Read(void* data, size_t size) {
    char* p = static_cast<char*>(data);
    size_t left = size;
    while (left > 0) {
      const ssize_t n = read(fd_, p, std::min<size_t>(left, size_t{1} << 30));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoError(errno, "cannot read atlas file", path_);
      if (n == 0) return Loss(path_, "truncated while reading");
      p += n;
      left -= static_cast<size_t>(n);
    }
    crc_ = Crc32(crc_, data, size);
    sha256_.Update(data, size);
    return absl::OkStatus();
  }
  uint32_t crc() const { return crc_; }
  // Checks the whole file against the manifest's entry: SHA-256 (version 2)
  // or CRC-32 (version 1). Call once, after the last Read.
  absl::Status Verify(const FileEntry& entry) {
    if (!entry.sha256.empty()) {
      const std::string actual = sha256_.HexDigest();
      if (actual != entry.sha256) {
        return Loss(path_, absl::StrCat("content checksum mismatch (manifest sha256 ", entry.sha256, ", file ",
                                        actual, ")"));
      }
      return absl::OkStatus();
    }
    if (crc_ != entry.crc) {
      return Loss(path_, absl::StrFormat("checksum mismatch (manifest %08x, file %08x)", entry.crc, crc_));
    }
    return absl::OkStatus();
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint32_t crc_ = Crc32(0, nullptr, 0);
  Sha256Stream sha256_;
};

// A binary array file: `count` elements then the CRC-32 of those bytes.
template <typename T>
absl::Status ReadArrayFile(const std::string& path, const FileEntry& entry, int64_t count, std::vector<T>* out) {
  const int64_t expected = count * static_cast<int64_t>(sizeof(T)) + 4;
  if (entry.bytes != expected) {
    return Loss(path, absl::StrCat("the manifest says ", entry.bytes, " bytes, the shape needs ", expected));
  }
  InFile in;
  TESSERA_RETURN_IF_ERROR(in.Open(path, expected));
  out->resize(static_cast<size_t>(count));
  TESSERA_RETURN_IF_ERROR(in.Read(out->data(), out->size() * sizeof(T)));
  const uint32_t body_crc = in.crc();
  uint32_t trailer = 0;
  TESSERA_RETURN_IF_ERROR(in.Read(&trailer, sizeof(trailer)));
  if (trailer != body_crc) {
    return Loss(path, absl::StrFormat("checksum mismatch (trailer %08x, data %08x)", trailer, body_crc));
  }
  return in.Verify(entry);
}

// A text file of exactly `count` newline-terminated lines.
absl::StatusOr<std::vector<std::string>> ReadLinesFile(const std::string& path, const FileEntry& entry,
                                                       int64_t count) {
  InFile in;
  TESSERA_RETURN_IF_ERROR(in.Open(path, entry.bytes));
  std::string text(static_cast<size_t>(entry.bytes), '\0');
  TESSERA_RETURN_IF_ERROR(in.Read(text.data(), text.size()));
  TESSERA_RETURN_IF_ERROR(in.Verify(entry));
  if (count == 0) {
    if (!text.empty()) return Loss(path, "expected no lines");
    return std::vector<std::string>{};
  }
  if (text.empty() || text.back() != '\n') return Loss(path, "does not end with a newline");
  text.pop_back();
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (static_cast<int64_t>(lines.size()) != count) {
    return Loss(path, absl::StrCat(lines.size(), " lines, the manifest says ", count));
  }
  return lines;
}

std::vector<std::string> GeneratedNames(char prefix, int64_t count) {
  std::vector<std::string> names(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) names[i] = absl::StrCat(std::string(1, prefix), i);
  return names;
}

absl::StatusOr<FileEntry> ParseFileEntry(const Fields& files, const std::string& name, int64_t version) {
  TESSERA_ASSIGN_OR_RETURN(Fields f, files.Object(name));
  FileEntry e;
  e.name = name;
  TESSERA_ASSIGN_OR_RETURN(e.bytes, f.Int("bytes", 0, int64_t{1} << 53));
  if (version >= 2) {
    TESSERA_ASSIGN_OR_RETURN(e.sha256, f.String("sha256"));
    if (e.sha256.size() != 64 || e.sha256.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return Loss(f.path(), absl::StrCat("field ", f.where(), "sha256 \"", e.sha256, "\" is not 64 hex digits"));
    }
  } else {
    TESSERA_ASSIGN_OR_RETURN(int64_t crc, f.Int("crc32", 0, 0xffffffffLL));
    e.crc = static_cast<uint32_t>(crc);
  }
  return e;
}

// Atlases saved before the manifest had "held_out_quality" kept it beside
// the files in "held_out_quality.txt" ("<name> <value>" lines); zeros when
// that is absent too.
absl::StatusOr<QualityMetrics> ReadLegacyHeldOut(const std::string& dir) {
  QualityMetrics q;
  const std::string path = JoinPath(dir, "held_out_quality.txt");
  std::ifstream in(path);
  if (!in) return q;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (parts.empty()) continue;
    double value = 0;
    if (parts.size() != 2 || !absl::SimpleAtod(parts[1], &value)) {
      return Loss(path, absl::StrCat("bad line '", line, "'"));
    }
    if (parts[0] == "documents") q.docs = static_cast<int64_t>(value);
    if (parts[0] == "qe_euclidean") q.qe_euclidean = value;
    if (parts[0] == "qe_cosine") q.qe_cosine = value;
    if (parts[0] == "topographic_error") q.topographic_error = value;
    if (parts[0] == "dead_units") q.dead_units = static_cast<int64_t>(value);
    if (parts[0] == "dead_unit_fraction") q.dead_unit_fraction = value;
  }
  return q;
}

}  // namespace

absl::StatusOr<Atlas> MakeAtlas(TrainResult result, std::vector<int32_t> bmu, std::vector<std::string> feature_names,
                                std::vector<std::string> document_ids, const TrainOptions& options) {
  Atlas a;
  a.model = std::move(result.model);
  SomModel& m = a.model;
  const size_t weights = static_cast<size_t>(std::max<int64_t>(m.features, 0)) *
                         static_cast<size_t>(std::max<int64_t>(m.grid.nodes(), 0));
  if (m.type == WeightType::kFloat16) {
    if (m.weights_f16.size() != weights) {
      return absl::InvalidArgumentError(absl::StrCat("MakeAtlas: ", m.weights_f16.size(), " fp16 weights, expected ",
                                                     weights));
    }
    m.weights_f32.resize(weights);  // widening is exact
    for (size_t k = 0; k < weights; ++k) m.weights_f32[k] = HalfToFloat(m.weights_f16[k]);
  }
  if (feature_names.empty()) feature_names = GeneratedNames('f', m.features);
  if (document_ids.empty()) document_ids = GeneratedNames('d', static_cast<int64_t>(bmu.size()));
  a.bmu = std::move(bmu);
  a.feature_names = std::move(feature_names);
  a.document_ids = std::move(document_ids);
  a.options = options;
  a.options.progress = nullptr;
  a.options.grid = a.model.grid;  // the map as trained
  a.history = std::move(result.history);
  a.epochs = result.epochs;
  a.converged = result.converged;
  a.final_quality = result.final_quality;
  a.created = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  if (absl::Status s = CheckAtlas(a); !s.ok()) return Annotate(s, "MakeAtlas");
  if (m.sq_norms.size() != static_cast<size_t>(m.grid.nodes())) {
    m.sq_norms.assign(static_cast<size_t>(m.grid.nodes()), 0.0f);
    cpu::ComputeSqNorms(m.view());
  }
  return a;
}

absl::Status SaveAtlas(const Atlas& atlas, absl::string_view directory) {
  TESSERA_RETURN_IF_ERROR(Annotate(CheckAtlas(atlas), "SaveAtlas"));
  const std::string dir(directory);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::ErrnoToStatus(ec.value(), absl::StrCat("SaveAtlas: cannot create directory ", dir));

  std::vector<FileEntry> files;
  // Each file is durable (data and name) before the next is written, so the
  // data files are before the manifest that vouches for them.
  auto add = [&](const char* name, std::initializer_list<absl::string_view> pieces) -> absl::Status {
    FileEntry e;
    e.name = name;
    Sha256Stream digest;
    for (absl::string_view p : pieces) {
      digest.Update(p.data(), p.size());
      e.bytes += static_cast<int64_t>(p.size());
    }
    e.sha256 = digest.HexDigest();
    TESSERA_RETURN_IF_ERROR(WriteFileDurably(JoinPath(dir, name), pieces));
    files.push_back(e);
    return absl::OkStatus();
  };
  const auto bytes = [](const void* data, size_t size) { return absl::string_view(static_cast<const char*>(data), size); };
  const std::vector<float>& w = atlas.model.weights_f32;
  const uint32_t w_crc = Crc32(Crc32(0, nullptr, 0), w.data(), w.size() * sizeof(float));
  TESSERA_RETURN_IF_ERROR(add(kCodebook, {bytes(w.data(), w.size() * sizeof(float)), bytes(&w_crc, sizeof(w_crc))}));
  const uint32_t b_crc = Crc32(Crc32(0, nullptr, 0), atlas.bmu.data(), atlas.bmu.size() * sizeof(int32_t));
  TESSERA_RETURN_IF_ERROR(
      add(kBmu, {bytes(atlas.bmu.data(), atlas.bmu.size() * sizeof(int32_t)), bytes(&b_crc, sizeof(b_crc))}));
  TESSERA_RETURN_IF_ERROR(add(kFeatures, {LinesText(atlas.feature_names)}));
  TESSERA_RETURN_IF_ERROR(add(kDocuments, {LinesText(atlas.document_ids)}));
  return WriteFileDurably(JoinPath(dir, kManifest), ManifestJson(atlas, files));
}

absl::Status SaveNewAtlas(const Atlas& atlas, absl::string_view directory) {
  namespace fs = std::filesystem;
  fs::path target = fs::path(std::string(directory)).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // "dir/"
  const std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("SaveNewAtlas: '", directory, "' does not name a directory"));
  }
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (fs::exists(target, ec)) {
    return absl::AlreadyExistsError(absl::StrCat("'", target.string(), "' already exists"));
  }
  fs::create_directories(parent, ec);
  if (ec) return absl::ErrnoToStatus(ec.value(), absl::StrCat("SaveNewAtlas: cannot create directory ", parent.string()));
  std::string staging = (parent / absl::StrCat(".", name, ".partial-XXXXXX")).string();
  if (mkdtemp(staging.data()) == nullptr) return ErrnoError(errno, "cannot create", staging);
  const auto discard = [&](absl::Status status) {
    fs::remove_all(staging, ec);
    return status;
  };
  if (absl::Status saved = SaveAtlas(atlas, staging); !saved.ok()) return discard(saved);
  if (renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) != 0) {
    int err = errno;
    // File systems without RENAME_NOREPLACE: a plain rename still refuses a
    // non-empty target.
    if ((err == EINVAL || err == ENOSYS) && !fs::exists(target, ec)) {
      err = rename(staging.c_str(), target.c_str()) == 0 ? 0 : errno;
    }
    if (err == EEXIST || err == ENOTEMPTY) {
      return discard(absl::AlreadyExistsError(absl::StrCat("'", target.string(), "' already exists")));
    }
    if (err != 0) return discard(ErrnoError(err, "cannot rename into place", target.string()));
  }
  return SyncDirectory(parent.string());
}

absl::StatusOr<Atlas> LoadAtlas(absl::string_view directory) {
  const std::string dir(directory);
  const std::string path = JoinPath(dir, kManifest);
  std::string text;
  {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) {
        return absl::NotFoundError(absl::StrCat("no SOM atlas in ", dir, " (", kManifest, " not found)"));
      }
      return ErrnoError(errno, "cannot stat", path);
    }
    if (st.st_size > (int64_t{64} << 20)) return Loss(path, "larger than 64 MiB");
    InFile in;
    TESSERA_RETURN_IF_ERROR(in.Open(path, st.st_size));
    text.resize(static_cast<size_t>(st.st_size));
    TESSERA_RETURN_IF_ERROR(in.Read(text.data(), text.size()));
  }
  Struct root;
  {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    const auto parsed = google::protobuf::util::JsonStringToMessage(text, &root, options);
    if (!parsed.ok()) return Loss(path, absl::StrCat("not valid JSON: ", std::string(parsed.message())));
  }
  const Fields top(root, "", path);
  TESSERA_ASSIGN_OR_RETURN(std::string format, top.String("format"));
  if (format != kFormat) return Loss(path, absl::StrCat("format is \"", format, "\", not \"", kFormat, "\""));
  TESSERA_ASSIGN_OR_RETURN(int64_t version, top.Int("version"));
  if (version < kOldestReadableVersion || version > kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("atlas file ", path, ": format version ", version,
                                                   " is not supported (this build reads versions ",
                                                   kOldestReadableVersion, " to ", kVersion, ")"));
  }
  // The manifest's own checksum: everything before its last field.
  {
    const size_t at = text.rfind(kManifestCrcKey);
    if (at == std::string::npos) return Loss(path, "missing field manifest_crc32");
    const size_t prefix = at + std::strlen(kManifestCrcKey);
    TESSERA_ASSIGN_OR_RETURN(int64_t stored, top.Int("manifest_crc32", 0, 0xffffffffLL));
    const uint32_t actual = Crc32(Crc32(0, nullptr, 0), text.data(), prefix);
    if (static_cast<uint32_t>(stored) != actual) {
      return Loss(path, absl::StrFormat("checksum mismatch (stored %08x, computed %08x)", stored, actual));
    }
  }

  Atlas a;
  a.format_version = static_cast<int>(version);
  SomModel& m = a.model;
  if (version >= 2) {
    TESSERA_ASSIGN_OR_RETURN(Fields layout, top.Object("codebook_layout"));
    TESSERA_ASSIGN_OR_RETURN(std::string order, layout.String("order"));
    if (order != "feature-major") {
      return Loss(path, absl::StrCat("codebook_layout.order is \"", order, "\"; this build reads \"feature-major\""));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(Fields grid, top.Object("grid"));
  TESSERA_ASSIGN_OR_RETURN(int64_t width, grid.Int("width", 1));
  TESSERA_ASSIGN_OR_RETURN(int64_t height, grid.Int("height", 1));
  m.grid.width = static_cast<int>(width);
  m.grid.height = static_cast<int>(height);
  TESSERA_ASSIGN_OR_RETURN(m.grid.topology, ParseEnum<Topology>(grid, "topology",
                                                                {Topology::kPlanar, Topology::kToroidal},
                                                                TopologyName));
  TESSERA_ASSIGN_OR_RETURN(m.features, top.Int("features", 1, std::numeric_limits<int32_t>::max()));
  TESSERA_ASSIGN_OR_RETURN(int64_t documents, top.Int("documents", 0, std::numeric_limits<int32_t>::max()));
  TESSERA_ASSIGN_OR_RETURN(m.type, ParseEnum<WeightType>(top, "weight_type",
                                                         {WeightType::kFloat32, WeightType::kFloat16},
                                                         WeightTypeName));
  TESSERA_ASSIGN_OR_RETURN(Fields options, top.Object("options"));
  TESSERA_ASSIGN_OR_RETURN(a.options, ParseOptions(options));
  a.options.grid = m.grid;
  TESSERA_ASSIGN_OR_RETURN(int64_t epochs, top.Int("epochs", 0));
  a.epochs = static_cast<int>(epochs);
  TESSERA_ASSIGN_OR_RETURN(a.converged, top.Bool("converged"));
  TESSERA_ASSIGN_OR_RETURN(Fields quality, top.Object("final_quality"));
  TESSERA_ASSIGN_OR_RETURN(a.final_quality, ParseQuality(quality));
  if (top.Has("held_out_quality")) {
    TESSERA_ASSIGN_OR_RETURN(Fields held_out, top.Object("held_out_quality"));
    TESSERA_ASSIGN_OR_RETURN(a.held_out_quality, ParseQuality(held_out));
  } else {
    TESSERA_ASSIGN_OR_RETURN(a.held_out_quality, ReadLegacyHeldOut(dir));
  }
  TESSERA_ASSIGN_OR_RETURN(const ListValue* history, top.List("history"));
  for (int i = 0; i < history->values_size(); ++i) {
    const Value& v = history->values(i);
    if (v.kind_case() != Value::kStructValue) return Loss(path, absl::StrCat("history[", i, "] is not an object"));
    TESSERA_ASSIGN_OR_RETURN(EpochReport r, ParseEpoch(Fields(v.struct_value(), absl::StrCat("history[", i, "]."), path)));
    a.history.push_back(r);
  }
  TESSERA_ASSIGN_OR_RETURN(a.created, top.String("created"));
  if (top.Has("job_id")) {
    TESSERA_ASSIGN_OR_RETURN(a.job_id, top.String("job_id"));
  }
  TESSERA_ASSIGN_OR_RETURN(Fields files, top.Object("files"));

  const int64_t nodes = m.grid.nodes();
  if (m.features * nodes > (int64_t{1} << 40)) return Loss(path, "the codebook size is implausible");
  TESSERA_ASSIGN_OR_RETURN(FileEntry codebook, ParseFileEntry(files, kCodebook, version));
  TESSERA_RETURN_IF_ERROR(ReadArrayFile(JoinPath(dir, kCodebook), codebook, m.features * nodes, &m.weights_f32));
  TESSERA_ASSIGN_OR_RETURN(FileEntry bmu, ParseFileEntry(files, kBmu, version));
  TESSERA_RETURN_IF_ERROR(ReadArrayFile(JoinPath(dir, kBmu), bmu, documents, &a.bmu));
  for (int64_t d = 0; d < documents; ++d) {
    if (a.bmu[d] < 0 || a.bmu[d] >= nodes) {
      return Loss(JoinPath(dir, kBmu), absl::StrCat("document ", d, " has BMU ", a.bmu[d], " outside the map"));
    }
  }
  if (files.Has(kFeatures)) {
    TESSERA_ASSIGN_OR_RETURN(FileEntry entry, ParseFileEntry(files, kFeatures, version));
    TESSERA_ASSIGN_OR_RETURN(a.feature_names, ReadLinesFile(JoinPath(dir, kFeatures), entry, m.features));
  } else {
    a.feature_names = GeneratedNames('f', m.features);
  }
  if (files.Has(kDocuments)) {
    TESSERA_ASSIGN_OR_RETURN(FileEntry entry, ParseFileEntry(files, kDocuments, version));
    TESSERA_ASSIGN_OR_RETURN(a.document_ids, ReadLinesFile(JoinPath(dir, kDocuments), entry, documents));
  } else {
    a.document_ids = GeneratedNames('d', documents);
  }

  if (version < 2) {
    // Still verified: every byte against the files' CRC-32 trailers and the
    // text files against their manifest CRC-32. What version 1 cannot catch is
    // a data file replaced together with a matching trailer.
    TESSERA_LOG(WARNING) << "SOM atlas " << dir << " has format version 1: its manifest records no content "
                         << "checksum of " << kCodebook << " and " << kBmu
                         << " (only their CRC-32 trailers are checked); save it again to record SHA-256";
  }
  // fp16 maps were stored widened; narrowing them back is exact.
  if (m.type == WeightType::kFloat16) {
    m.weights_f16.resize(m.weights_f32.size());
    for (size_t k = 0; k < m.weights_f32.size(); ++k) m.weights_f16[k] = FloatToHalf(m.weights_f32[k]);
  }
  m.sq_norms.assign(static_cast<size_t>(nodes), 0.0f);
  cpu::ComputeSqNorms(m.view());
  return a;
}

std::vector<int64_t> DocumentsInCell(const Atlas& atlas, int64_t node) {
  std::vector<int64_t> docs;
  for (size_t d = 0; d < atlas.bmu.size(); ++d) {
    if (atlas.bmu[d] == node) docs.push_back(static_cast<int64_t>(d));
  }
  return docs;
}

std::vector<FeatureWeight> TopFeatures(const Atlas& atlas, int64_t node, int k) {
  const SomModel& m = atlas.model;
  if (node < 0 || node >= m.grid.nodes() || k <= 0 || m.weights_f32.empty()) return {};
  std::vector<FeatureWeight> all(static_cast<size_t>(m.features));
  for (int64_t v = 0; v < m.features; ++v) {
    all[v] = FeatureWeight{static_cast<int32_t>(v), m.weights_f32[v * m.grid.nodes() + node]};
  }
  const size_t n = std::min<size_t>(static_cast<size_t>(k), all.size());
  std::partial_sort(all.begin(), all.begin() + n, all.end(), [](const FeatureWeight& a, const FeatureWeight& b) {
    return a.weight > b.weight || (a.weight == b.weight && a.feature < b.feature);
  });
  all.resize(n);
  return all;
}

std::vector<int64_t> HitCounts(const Atlas& atlas) {
  std::vector<int64_t> hits(static_cast<size_t>(std::max<int64_t>(atlas.nodes(), 0)), 0);
  for (int32_t b : atlas.bmu) {
    if (b >= 0 && b < static_cast<int64_t>(hits.size())) ++hits[b];
  }
  return hits;
}

}  // namespace som
}  // namespace tessera
