#include "services/reconstruction/formats/geometry_json.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/durable_file.h"
#include "common/status.h"

namespace tessera::recon::formats {
namespace {

using Json = nlohmann::json;

// Counts beyond this are typos, not scanners (and keep products in int64).
constexpr int64_t kMaxCount = int64_t{1} << 31;
constexpr const char* kSupportedTypes = "parallel, fanflat, cone, parallel_vec, fanflat_vec, cone_vec";

absl::Status FieldError(absl::string_view path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

// A short rendering of an offending value for messages.
std::string Shown(const Json& value) {
  std::string s = value.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

const Json* Find(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

absl::StatusOr<double> AsFinite(const Json& value, absl::string_view path) {
  if (!value.is_number()) return FieldError(path, absl::StrCat("expected a number, got ", Shown(value)));
  const double d = value.get<double>();
  if (!std::isfinite(d)) return FieldError(path, absl::StrCat("must be finite, got ", Shown(value)));
  return d;
}

absl::StatusOr<double> RequiredNumber(const Json& object, absl::string_view object_path, const char* key) {
  const std::string path = absl::StrCat(object_path, ".", key);
  const Json* value = Find(object, key);
  if (value == nullptr) return FieldError(path, "missing");
  return AsFinite(*value, path);
}

absl::StatusOr<int64_t> AsPositiveInt(const Json& value, absl::string_view path) {
  const std::string bad = absl::StrCat("must be a positive integer, got ", Shown(value));
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u == 0) return FieldError(path, bad);
    if (u > static_cast<uint64_t>(kMaxCount)) return FieldError(path, absl::StrCat("too large: ", u));
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) {
    const int64_t i = value.get<int64_t>();
    if (i <= 0) return FieldError(path, bad);
    if (i > kMaxCount) return FieldError(path, absl::StrCat("too large: ", i));
    return i;
  }
  if (value.is_number_float()) {  // 256.0 from a float array is fine, 2.5 is not
    const double d = value.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d <= 0) return FieldError(path, bad);
    if (d > static_cast<double>(kMaxCount)) return FieldError(path, absl::StrCat("too large: ", Shown(value)));
    return static_cast<int64_t>(d);
  }
  return FieldError(path, bad);
}

absl::StatusOr<int64_t> PositiveInt(const Json& object, absl::string_view object_path, const char* key,
                                    int64_t default_value = -1) {
  const std::string path = absl::StrCat(object_path, ".", key);
  const Json* value = Find(object, key);
  if (value == nullptr) {
    if (default_value > 0) return default_value;
    return FieldError(path, "missing");
  }
  return AsPositiveInt(*value, path);
}

// One axis of the volume window, from vol_geom.Option (ASTRA's C++ and XML
// spelling), vol_geom.option (what astra.create_vol_geom builds in Python and
// MATLAB) or vol_geom itself.
absl::Status ReadWindow(const Json& vol, const char* axis, double* lo, double* hi) {
  const std::string min_key = absl::StrCat("WindowMin", axis), max_key = absl::StrCat("WindowMax", axis);
  std::vector<std::pair<const Json*, std::string>> candidates;
  for (const char* key : {"Option", "option"}) {
    const Json* option = Find(vol, key);
    if (option == nullptr) continue;
    const std::string name = absl::StrCat("vol_geom.", key);
    if (!option->is_object()) return FieldError(name, absl::StrCat("expected an object, got ", Shown(*option)));
    candidates.push_back({option, name});
  }
  candidates.push_back({&vol, "vol_geom"});
  const Json* holder = nullptr;
  std::string where;
  for (const auto& [candidate, name] : candidates) {
    const bool has_min = Find(*candidate, min_key.c_str()) != nullptr;
    const bool has_max = Find(*candidate, max_key.c_str()) != nullptr;
    if (!has_min && !has_max) continue;
    if (holder != nullptr) {
      return FieldError(absl::StrCat(name, ".", min_key, "/", max_key),
                        absl::StrCat("given both in ", where, " and in ", name, "; keep one"));
    }
    if (has_min != has_max) {
      return FieldError(absl::StrCat(name, ".", has_min ? max_key : min_key),
                        absl::StrCat("missing (", has_min ? min_key : max_key, " is given)"));
    }
    holder = candidate;
    where = name;
  }
  if (holder == nullptr) return absl::OkStatus();  // keep the centred default
  TESSERA_ASSIGN_OR_RETURN(*lo, RequiredNumber(*holder, where, min_key.c_str()));
  TESSERA_ASSIGN_OR_RETURN(*hi, RequiredNumber(*holder, where, max_key.c_str()));
  if (!(*hi > *lo)) {
    return FieldError(absl::StrCat(where, ".", min_key, "/", max_key),
                      absl::StrCat("min must be below max, got [", *lo, ", ", *hi, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<VolumeGeometry> ParseVolume(const Json& vol) {
  if (!vol.is_object()) return FieldError("vol_geom", absl::StrCat("expected an object, got ", Shown(vol)));
  TESSERA_ASSIGN_OR_RETURN(const int64_t nx, PositiveInt(vol, "vol_geom", "GridColCount"));
  TESSERA_ASSIGN_OR_RETURN(const int64_t ny, PositiveInt(vol, "vol_geom", "GridRowCount"));
  TESSERA_ASSIGN_OR_RETURN(const int64_t nz, PositiveInt(vol, "vol_geom", "GridSliceCount", 1));
  VolumeGeometry v = CenteredVolume(nx, ny, nz);
  TESSERA_RETURN_IF_ERROR(ReadWindow(vol, "X", &v.min_x, &v.max_x));
  TESSERA_RETURN_IF_ERROR(ReadWindow(vol, "Y", &v.min_y, &v.max_y));
  TESSERA_RETURN_IF_ERROR(ReadWindow(vol, "Z", &v.min_z, &v.max_z));
  return v;
}

absl::StatusOr<std::vector<double>> ParseAngles(const Json& proj) {
  const Json* angles = Find(proj, "ProjectionAngles");
  if (angles == nullptr) return FieldError("proj_geom.ProjectionAngles", "missing");
  std::vector<double> out;
  if (angles->is_object()) {  // our extension: {"start", "stop", "count"}
    const char* kPath = "proj_geom.ProjectionAngles";
    TESSERA_ASSIGN_OR_RETURN(const double start, RequiredNumber(*angles, kPath, "start"));
    TESSERA_ASSIGN_OR_RETURN(const double stop, RequiredNumber(*angles, kPath, "stop"));
    TESSERA_ASSIGN_OR_RETURN(const int64_t count, PositiveInt(*angles, kPath, "count"));
    if (count > (int64_t{1} << 24)) return FieldError("proj_geom.ProjectionAngles.count", "too large");
    out.resize(count);
    for (int64_t i = 0; i < count; ++i) out[i] = start + (stop - start) * static_cast<double>(i) / count;
    return out;
  }
  if (!angles->is_array()) {
    return FieldError("proj_geom.ProjectionAngles",
                      absl::StrCat("expected an array of numbers or {\"start\", \"stop\", \"count\"}, got ",
                                   Shown(*angles)));
  }
  if (angles->empty()) return FieldError("proj_geom.ProjectionAngles", "empty");
  out.reserve(angles->size());
  for (size_t i = 0; i < angles->size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const double a, AsFinite((*angles)[i], absl::StrCat("proj_geom.ProjectionAngles[", i, "]")));
    out.push_back(a);
  }
  return out;
}

absl::Status ParseVectors(const Json& proj, int width, ProjectionGeometry* p) {
  const Json* vectors = Find(proj, "Vectors");
  if (vectors == nullptr) return FieldError("proj_geom.Vectors", "missing");
  if (!vectors->is_array()) {
    return FieldError("proj_geom.Vectors", absl::StrCat("expected an array of rows, got ", Shown(*vectors)));
  }
  if (vectors->empty()) return FieldError("proj_geom.Vectors", "no rows");
  p->views.reserve(vectors->size());
  double n[12];
  for (size_t i = 0; i < vectors->size(); ++i) {
    const Json& row = (*vectors)[i];
    const std::string path = absl::StrCat("proj_geom.Vectors row ", i);
    if (!row.is_array()) return FieldError(path, absl::StrCat("expected an array of ", width, " numbers"));
    if (static_cast<int>(row.size()) != width) {
      return FieldError(path, absl::StrCat("expected ", width, " numbers, got ", row.size()));
    }
    for (int k = 0; k < width; ++k) {
      TESSERA_ASSIGN_OR_RETURN(n[k], AsFinite(row[k], absl::StrCat(path, " element ", k)));
    }
    ProjectionVectors w;
    if (width == 6) {
      w.source_or_ray = {n[0], n[1], 0};
      w.det_center = {n[2], n[3], 0};
      w.u = {n[4], n[5], 0};
    } else {
      w.source_or_ray = {n[0], n[1], n[2]};
      w.det_center = {n[3], n[4], n[5]};
      w.u = {n[6], n[7], n[8]};
      w.v = {n[9], n[10], n[11]};
    }
    p->views.push_back(w);
  }
  return absl::OkStatus();
}

absl::StatusOr<ProjectionGeometry> ParseProjection(const Json& proj) {
  if (!proj.is_object()) return FieldError("proj_geom", absl::StrCat("expected an object, got ", Shown(proj)));
  const Json* type_value = Find(proj, "type");
  if (type_value == nullptr) return FieldError("proj_geom.type", absl::StrCat("missing (one of ", kSupportedTypes, ")"));
  if (!type_value->is_string()) {
    return FieldError("proj_geom.type", absl::StrCat("expected a string, got ", Shown(*type_value)));
  }
  const std::string type = type_value->get<std::string>();
  const char* kP = "proj_geom";
  ProjectionGeometry p;
  if (type == "parallel" || type == "fanflat") {
    TESSERA_ASSIGN_OR_RETURN(const double width, RequiredNumber(proj, kP, "DetectorWidth"));
    TESSERA_ASSIGN_OR_RETURN(const int64_t count, PositiveInt(proj, kP, "DetectorCount"));
    TESSERA_ASSIGN_OR_RETURN(const std::vector<double> angles, ParseAngles(proj));
    if (type == "parallel") return ParallelBeam2D(angles, width, count);
    TESSERA_ASSIGN_OR_RETURN(const double dso, RequiredNumber(proj, kP, "DistanceOriginSource"));
    TESSERA_ASSIGN_OR_RETURN(const double dod, RequiredNumber(proj, kP, "DistanceOriginDetector"));
    return FanBeam2D(angles, width, count, dso, dod);
  }
  if (type == "cone") {
    TESSERA_ASSIGN_OR_RETURN(const double sx, RequiredNumber(proj, kP, "DetectorSpacingX"));
    TESSERA_ASSIGN_OR_RETURN(const double sy, RequiredNumber(proj, kP, "DetectorSpacingY"));
    TESSERA_ASSIGN_OR_RETURN(const int64_t rows, PositiveInt(proj, kP, "DetectorRowCount"));
    TESSERA_ASSIGN_OR_RETURN(const int64_t cols, PositiveInt(proj, kP, "DetectorColCount"));
    TESSERA_ASSIGN_OR_RETURN(const std::vector<double> angles, ParseAngles(proj));
    TESSERA_ASSIGN_OR_RETURN(const double dso, RequiredNumber(proj, kP, "DistanceOriginSource"));
    TESSERA_ASSIGN_OR_RETURN(const double dod, RequiredNumber(proj, kP, "DistanceOriginDetector"));
    return ConeBeam(angles, sx, sy, rows, cols, dso, dod);
  }
  if (type == "parallel_vec" || type == "fanflat_vec") {
    p.beam = type == "parallel_vec" ? BeamKind::kParallel : BeamKind::kFan;
    p.is_2d = true;
    TESSERA_ASSIGN_OR_RETURN(p.det_cols, PositiveInt(proj, kP, "DetectorCount"));
    p.det_rows = 1;
    TESSERA_RETURN_IF_ERROR(ParseVectors(proj, 6, &p));
    return p;
  }
  if (type == "cone_vec") {
    p.beam = BeamKind::kCone;
    p.is_2d = false;
    TESSERA_ASSIGN_OR_RETURN(p.det_rows, PositiveInt(proj, kP, "DetectorRowCount"));
    TESSERA_ASSIGN_OR_RETURN(p.det_cols, PositiveInt(proj, kP, "DetectorColCount"));
    TESSERA_RETURN_IF_ERROR(ParseVectors(proj, 12, &p));
    return p;
  }
  return FieldError("proj_geom.type", absl::StrCat("unsupported \"", type, "\" (supported: ", kSupportedTypes, ")"));
}

// Shortest text that parses back to exactly `d` (nlohmann's round-trip printer).
std::string Num(double d) { return Json(d).dump(); }

std::string VectorRow(const ProjectionVectors& w, bool is_2d) {
  std::vector<double> n;
  if (is_2d) {
    n = {w.source_or_ray.x, w.source_or_ray.y, w.det_center.x, w.det_center.y, w.u.x, w.u.y};
  } else {
    n = {w.source_or_ray.x, w.source_or_ray.y, w.source_or_ray.z, w.det_center.x, w.det_center.y, w.det_center.z,
         w.u.x,           w.u.y,           w.u.z,           w.v.x,          w.v.y,          w.v.z};
  }
  return absl::StrCat("[", absl::StrJoin(n, ", ", [](std::string* out, double d) { out->append(Num(d)); }), "]");
}

}  // namespace

absl::StatusOr<CtGeometry> ParseGeometryJson(absl::string_view text) {
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, column 7: ..." or
    // "[json.exception.out_of_range.406] number overflow parsing '1e999'".
    std::string what = e.what();
    const size_t pos = what.find("] ");
    return absl::InvalidArgumentError(
        absl::StrCat("geometry JSON: ", pos == std::string::npos ? what : what.substr(pos + 2)));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("geometry JSON: expected an object with vol_geom and proj_geom, got ", Shown(root)));
  }
  const Json* vol = Find(root, "vol_geom");
  if (vol == nullptr) return FieldError("vol_geom", "missing");
  const Json* proj = Find(root, "proj_geom");
  if (proj == nullptr) return FieldError("proj_geom", "missing");
  CtGeometry g;
  TESSERA_ASSIGN_OR_RETURN(g.volume, ParseVolume(*vol));
  TESSERA_ASSIGN_OR_RETURN(g.projection, ParseProjection(*proj));
  const ProjectionGeometry& p = g.projection;
  if (p.det_cols * p.det_rows > (int64_t{1} << 40) / p.num_views()) {
    return FieldError("proj_geom", absl::StrCat(p.det_cols, "x", p.det_rows, " detector pixels x ", p.num_views(),
                                                " projections is too large"));
  }
  TESSERA_RETURN_IF_ERROR(Validate(g));
  return g;
}

absl::StatusOr<CtGeometry> ReadGeometryJson(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    const std::string msg = absl::StrCat(path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
  }
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  if (st.st_size > kMaxGeometryJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.st_size, " bytes exceeds the ",
                                                   kMaxGeometryJsonBytes >> 20, " MiB limit for a geometry JSON"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  absl::StatusOr<CtGeometry> g = ParseGeometryJson(text.str());
  if (!g.ok()) return Annotate(g.status(), path);
  return g;
}

std::string WriteGeometryJson(const CtGeometry& g) {
  const VolumeGeometry& v = g.volume;
  const ProjectionGeometry& p = g.projection;
  // A default 2-D slab is written as ASTRA writes a 2-D vol_geom (no slices,
  // no z window), so the file also loads into ASTRA's 2-D functions.
  const bool astra_2d = p.is_2d && v.nz == 1 && v.min_z == -0.5 && v.max_z == 0.5;
  std::string out = "{\n  \"vol_geom\": {\n";
  absl::StrAppend(&out, "    \"GridColCount\": ", v.nx, ",\n    \"GridRowCount\": ", v.ny, ",\n");
  if (!astra_2d) absl::StrAppend(&out, "    \"GridSliceCount\": ", v.nz, ",\n");
  absl::StrAppend(&out, "    \"option\": {\n");
  absl::StrAppend(&out, "      \"WindowMinX\": ", Num(v.min_x), ", \"WindowMaxX\": ", Num(v.max_x), ",\n");
  absl::StrAppend(&out, "      \"WindowMinY\": ", Num(v.min_y), ", \"WindowMaxY\": ", Num(v.max_y),
                  astra_2d ? "\n" : ",\n");
  if (!astra_2d) {
    absl::StrAppend(&out, "      \"WindowMinZ\": ", Num(v.min_z), ", \"WindowMaxZ\": ", Num(v.max_z), "\n");
  }
  absl::StrAppend(&out, "    }\n  },\n  \"proj_geom\": {\n");
  const char* type = p.beam == BeamKind::kCone ? "cone_vec" : p.beam == BeamKind::kFan ? "fanflat_vec" : "parallel_vec";
  absl::StrAppend(&out, "    \"type\": \"", type, "\",\n");
  if (p.is_2d) {
    absl::StrAppend(&out, "    \"DetectorCount\": ", p.det_cols, ",\n");
  } else {
    absl::StrAppend(&out, "    \"DetectorRowCount\": ", p.det_rows, ",\n    \"DetectorColCount\": ", p.det_cols, ",\n");
  }
  absl::StrAppend(&out, "    \"Vectors\": [\n");
  for (int64_t i = 0; i < p.num_views(); ++i) {
    absl::StrAppend(&out, "      ", VectorRow(p.views[i], p.is_2d), i + 1 < p.num_views() ? ",\n" : "\n");
  }
  absl::StrAppend(&out, "    ]\n  }\n}\n");
  return out;
}

absl::Status WriteGeometryJsonFile(const CtGeometry& geometry, const std::string& path) {
  const absl::Status written = WriteFileAtomically(path, WriteGeometryJson(geometry));
  if (!written.ok()) return absl::InternalError(absl::StrCat(path, ": write failed: ", written.message()));
  return absl::OkStatus();
}

}  // namespace tessera::recon::formats
