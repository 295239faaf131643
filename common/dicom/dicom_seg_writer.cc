// WriteDicomSeg (dicom_seg.h): a label volume as one BINARY Segmentation
// object, built with dcmdata (docs/DEVELOPING.md says why not dcmseg).
#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcitem.h>
#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcsequen.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcvrlo.h>
#include <dcmtk/dcmdata/dcvrul.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dicom/deidentify.h"
#include "common/dicom/dicom_seg.h"
#include "common/dicom/dicom_write_common.h"
#include "common/status.h"

namespace tessera::dicom {
namespace {

using internal::Ds3;
using internal::Vec3;

// Frames and bytes a SEG may hold: DICOM lengths are 32-bit, and each frame
// costs DCMTK a few kB of functional-group items while the object is built.
constexpr int64_t kMaxFrames = 500000;
constexpr int64_t kMaxPixelBytes = int64_t{0xFFFFFFFE};

// The item of a new one-item sequence `key` in `parent` (appending directly:
// findOrCreateSequenceItem walks the list, quadratic over 10^5 frames).
DcmItem* NewItemIn(DcmItem* parent, const DcmTagKey& key) {
  auto* seq = new DcmSequenceOfItems(key);
  parent->insert(seq, /*replaceOld=*/true);
  auto* item = new DcmItem();
  seq->append(item);
  return item;
}

void PutCode(DcmItem* item, const char* value, const char* scheme, const char* meaning) {
  item->putAndInsertString(DCM_CodeValue, value);
  item->putAndInsertString(DCM_CodingSchemeDesignator, scheme);
  item->putAndInsertString(DCM_CodeMeaning, meaning);
}

// A LO value: at most 64 characters, no backslash (the value separator).
std::string Lo(std::string s) {
  std::replace(s.begin(), s.end(), '\\', '/');
  if (s.size() > 64) s.resize(64);
  return s;
}

// The labels as integers; INVALID_ARGUMENT naming the first bad voxel.
absl::StatusOr<std::vector<int32_t>> LabelValues(const NDArray& a) {
  const int64_t n = a.num_elements();
  std::vector<int32_t> out(static_cast<size_t>(n));
  auto take = [&](auto* p) -> absl::Status {
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(p[i]);
      if (!(v >= 0 && v < 2147483648.0) || v != std::floor(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "labels: voxel ", i, " is ", v, "; a SEG holds integer label values in [0, 2^31) (0 = background)"));
      }
      out[i] = static_cast<int32_t>(v);
    }
    return absl::OkStatus();
  };
  absl::Status st;
  switch (a.dtype()) {
    case DType::kUInt8: st = take(a.data<uint8_t>()); break;
    case DType::kInt8: st = take(a.data<int8_t>()); break;
    case DType::kUInt16: st = take(a.data<uint16_t>()); break;
    case DType::kInt16: st = take(a.data<int16_t>()); break;
    case DType::kInt32: st = take(a.data<int32_t>()); break;
    case DType::kFloat32: st = take(a.data<float>()); break;
    case DType::kFloat64: st = take(a.data<double>()); break;
    default: return absl::InvalidArgumentError("labels: unsupported voxel type for a SEG");
  }
  if (!st.ok()) return st;
  return out;
}

std::string Now(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

}  // namespace

absl::StatusOr<DicomWriteResult> WriteDicomSeg(const Volume& labels, const std::string& path,
                                               const DicomSegWriteOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(const internal::SliceLayout layout, internal::LayoutSlices(labels));
  TESSERA_RETURN_IF_ERROR(CheckDeidentification(options.deidentify));
  const Deidentification& deid = options.deidentify;
  const int nx = layout.nx, ny = layout.ny, nz = layout.nz;
  const int64_t npix = static_cast<int64_t>(nx) * ny;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> values, LabelValues(labels.data));

  // Segments: the distinct non-zero values, ascending; segment number of each voxel.
  std::vector<int32_t> label_of_segment = {0};  // [0] = background
  {
    int32_t max_value = 0;
    for (int32_t v : values) max_value = std::max(max_value, v);
    if (max_value <= (1 << 22)) {
      std::vector<char> seen(static_cast<size_t>(max_value) + 1, 0);
      for (int32_t v : values) seen[v] = 1;
      for (int32_t v = 1; v <= max_value; ++v) {
        if (seen[v]) label_of_segment.push_back(v);
      }
    } else {
      std::vector<int32_t> distinct;
      std::unordered_map<int32_t, char> seen;
      for (int32_t v : values) {
        if (v != 0 && seen.emplace(v, 1).second) distinct.push_back(v);
      }
      std::sort(distinct.begin(), distinct.end());
      label_of_segment.insert(label_of_segment.end(), distinct.begin(), distinct.end());
    }
  }
  const int num_segments = static_cast<int>(label_of_segment.size()) - 1;
  if (num_segments == 0) {
    return absl::InvalidArgumentError("labels: every voxel is 0 (background); a SEG needs at least one segment");
  }
  if (num_segments > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels: ", num_segments, " distinct values; a SEG holds at most 65535 segments"));
  }
  std::vector<uint16_t> segment(values.size());
  {
    std::unordered_map<int32_t, uint16_t> number;
    for (int s = 1; s <= num_segments; ++s) number[label_of_segment[s]] = static_cast<uint16_t>(s);
    int32_t last_value = 0;
    uint16_t last_number = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const int32_t v = values[i];
      if (v != last_value) {
        last_value = v;
        last_number = v == 0 ? 0 : number[v];
      }
      segment[i] = last_number;
    }
  }
  values = {};

  // Frames: (segment, slice) where the segment is present, segment-major;
  // the first and last slices keep one frame each so the grid's extent
  // survives (an empty frame of segment 1 if need be).
  std::vector<std::vector<uint16_t>> present(nz);  // segments present per slice, ascending
  {
    std::vector<int> stamp(num_segments + 1, -1);
    for (int k = 0; k < nz; ++k) {
      const uint16_t* s = segment.data() + npix * k;
      for (int64_t q = 0; q < npix; ++q) {
        if (s[q] != 0 && stamp[s[q]] != k) {
          stamp[s[q]] = k;
          present[k].push_back(s[q]);
        }
      }
      if (present[k].empty() && (k == 0 || k == nz - 1)) present[k].push_back(1);
      std::sort(present[k].begin(), present[k].end());
    }
  }
  std::vector<std::vector<int>> slices_of(num_segments + 1);
  for (int k = 0; k < nz; ++k) {
    for (uint16_t s : present[k]) slices_of[s].push_back(k);
  }
  struct FrameRef {
    uint16_t segment;
    int slice;
  };
  std::vector<FrameRef> frames;
  for (int s = 1; s <= num_segments; ++s) {
    for (int k : slices_of[s]) frames.push_back({static_cast<uint16_t>(s), k});
  }
  const int64_t num_frames = static_cast<int64_t>(frames.size());
  const int64_t pixel_bytes = (num_frames * npix + 7) / 8;
  if (num_frames > kMaxFrames || pixel_bytes + 1 > kMaxPixelBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "labels: the SEG would need ", num_frames, " frames (", pixel_bytes, " bytes of 1-bit pixels); at most ",
        kMaxFrames, " frames and 4 GiB of pixel data (split the labels over several SEGs)"));
  }

  // Reference.
  std::unique_ptr<internal::Reference> ref;
  if (!options.reference.empty()) {
    TESSERA_ASSIGN_OR_RETURN(ref, internal::LoadReference(options.reference));
  }
  DicomWriteResult result;
  result.sop_class_uid = UID_SegmentationStorage;
  result.study_instance_uid = internal::StudyUidFor(ref.get(), deid);
  result.series_instance_uid = internal::NewUid(SITE_SERIES_UID_ROOT, deid);
  const std::string for_uid = internal::FrameOfReferenceUidFor(ref.get(), options.same_frame_of_reference, deid);
  const int series_number = options.series_number > 0 ? options.series_number
                            : ref                     ? ref->info.series_number + 1000
                                                      : 1;

  DcmFileFormat file;
  DcmDataset* ds = file.getDataset();
  auto put = [&](const DcmTagKey& key, const std::string& v) { ds->putAndInsertString(key, v.c_str()); };
  put(DCM_SpecificCharacterSet, "ISO_IR 192");
  put(DCM_ImageType, "DERIVED\\PRIMARY");
  put(DCM_SOPClassUID, UID_SegmentationStorage);
  put(DCM_SOPInstanceUID, internal::NewUid(SITE_INSTANCE_UID_ROOT, deid));
  internal::PutPatientAndStudy(ds, ref.get(), deid, result.study_instance_uid);
  // Content date/time (Type 1): a dummy when de-identifying (no dates kept).
  put(DCM_ContentDate, deid.enabled ? "19000101" : Now("%Y%m%d"));
  put(DCM_ContentTime, deid.enabled ? "000000" : Now("%H%M%S"));
  put(DCM_Modality, "SEG");
  put(DCM_Manufacturer, "Tessera");
  put(DCM_ManufacturerModelName, "Tessera");
  put(DCM_DeviceSerialNumber, "1");
  put(DCM_SoftwareVersions, "1");
  put(DCM_SeriesInstanceUID, result.series_instance_uid);
  put(DCM_SeriesNumber, absl::StrCat(series_number));
  put(DCM_SeriesDescription, options.series_description);
  if (ref && !ref->laterality.empty()) put(DCM_Laterality, ref->laterality);
  put(DCM_InstanceNumber, "1");
  put(DCM_FrameOfReferenceUID, for_uid);
  put(DCM_PositionReferenceIndicator, "");
  put(DCM_ContentLabel, "SEGMENTATION");
  put(DCM_ContentDescription, options.series_description);
  put(DCM_ContentCreatorName, "");
  ds->putAndInsertUint16(DCM_SamplesPerPixel, 1);
  put(DCM_PhotometricInterpretation, "MONOCHROME2");
  put(DCM_NumberOfFrames, absl::StrCat(num_frames));
  ds->putAndInsertUint16(DCM_Rows, static_cast<Uint16>(ny));
  ds->putAndInsertUint16(DCM_Columns, static_cast<Uint16>(nx));
  ds->putAndInsertUint16(DCM_BitsAllocated, 1);
  ds->putAndInsertUint16(DCM_BitsStored, 1);
  ds->putAndInsertUint16(DCM_HighBit, 0);
  ds->putAndInsertUint16(DCM_PixelRepresentation, 0);
  put(DCM_LossyImageCompression, "00");
  put(DCM_SegmentationType, "BINARY");

  // Referenced series: every reference slice (or its one multi-frame file).
  std::vector<int> ref_slice(nz, -1);
  if (ref) {
    DcmItem* series = NewItemIn(ds, DCM_ReferencedSeriesSequence);
    series->putAndInsertString(DCM_SeriesInstanceUID,
                               internal::CopiedUid(deid, ref->info.series_instance_uid).c_str());
    auto* instances = new DcmSequenceOfItems(DCM_ReferencedInstanceSequence);
    series->insert(instances, true);
    const std::vector<std::string> one = {ref->sop_instance};
    for (const std::string& uid : ref->slice_instances.empty() ? one : ref->slice_instances) {
      auto* inst = new DcmItem();
      instances->append(inst);
      inst->putAndInsertString(DCM_ReferencedSOPClassUID, ref->sop_class.c_str());
      inst->putAndInsertString(DCM_ReferencedSOPInstanceUID, internal::CopiedUid(deid, uid).c_str());
    }
    if (!ref->slice_instances.empty()) {
      for (int k = 0; k < nz; ++k) ref_slice[k] = internal::CoincidingReferenceSlice(*ref, labels.geometry, k);
    }
  }

  // Segments.
  {
    auto* seq = new DcmSequenceOfItems(DCM_SegmentSequence);
    ds->insert(seq, true);
    for (int s = 1; s <= num_segments; ++s) {
      auto* item = new DcmItem();
      seq->append(item);
      const int32_t value = label_of_segment[s];
      // Generic codes: a label map says nothing anatomical about its values.
      PutCode(NewItemIn(item, DCM_SegmentedPropertyCategoryCodeSequence), "85756007", "SCT", "Tissue");
      item->putAndInsertUint16(DCM_SegmentNumber, static_cast<Uint16>(s));
      const auto name = options.segment_names.find(value);
      const std::string label =
          Lo(name != options.segment_names.end() && !name->second.empty() ? name->second : absl::StrCat("label ", value));
      item->putAndInsertString(DCM_SegmentLabel, label.c_str());
      item->putAndInsertString(DCM_SegmentAlgorithmType, "AUTOMATIC");
      item->putAndInsertString(DCM_SegmentAlgorithmName, "Tessera");
      PutCode(NewItemIn(item, DCM_SegmentedPropertyTypeCodeSequence), "85756007", "SCT", "Tissue");
      // The label value (private: no standard attribute holds it).
      item->putAndInsertString(DcmTag(0x0071, 0x0010, EVR_LO), "TESSERA");
      item->putAndInsertString(DcmTag(0x0071, 0x1001, EVR_LO), absl::StrCat(value).c_str());
    }
  }

  // Dimensions: segment, then position.
  const std::string dim_uid = internal::NewUid(SITE_UID_ROOT, deid);
  NewItemIn(ds, DCM_DimensionOrganizationSequence)->putAndInsertString(DCM_DimensionOrganizationUID, dim_uid.c_str());
  {
    auto* seq = new DcmSequenceOfItems(DCM_DimensionIndexSequence);
    ds->insert(seq, true);
    const struct {
      DcmTagKey pointer, group;
      const char* label;
    } dims[] = {{DCM_ReferencedSegmentNumber, DCM_SegmentIdentificationSequence, "ReferencedSegmentNumber"},
                {DCM_ImagePositionPatient, DCM_PlanePositionSequence, "ImagePositionPatient"}};
    for (const auto& d : dims) {
      auto* item = new DcmItem();
      seq->append(item);
      item->putAndInsertString(DCM_DimensionOrganizationUID, dim_uid.c_str());
      item->putAndInsertTagKey(DCM_DimensionIndexPointer, d.pointer);
      item->putAndInsertTagKey(DCM_FunctionalGroupPointer, d.group);
      item->putAndInsertString(DCM_DimensionDescriptionLabel, d.label);
    }
  }

  // Shared groups: spacing and orientation.
  {
    DcmItem* shared = NewItemIn(ds, DCM_SharedFunctionalGroupsSequence);
    DcmItem* measures = NewItemIn(shared, DCM_PixelMeasuresSequence);
    measures->putAndInsertString(DCM_SliceThickness, layout.thickness.c_str());
    measures->putAndInsertString(DCM_SpacingBetweenSlices, layout.thickness.c_str());
    measures->putAndInsertString(DCM_PixelSpacing, layout.pixel_spacing.c_str());
    NewItemIn(shared, DCM_PlaneOrientationSequence)
        ->putAndInsertString(DCM_ImageOrientationPatient, layout.orientation.c_str());
  }

  // Per-frame groups.
  {
    std::vector<std::string> positions(nz);
    for (int k = 0; k < nz; ++k) positions[k] = Ds3(layout.Position(k));
    const std::string ref_class = ref ? ref->sop_class : "";
    std::vector<std::string> ref_uids(nz);
    for (int k = 0; k < nz; ++k) {
      if (ref_slice[k] >= 0) ref_uids[k] = internal::CopiedUid(deid, ref->slice_instances[ref_slice[k]]);
    }
    auto* seq = new DcmSequenceOfItems(DCM_PerFrameFunctionalGroupsSequence);
    ds->insert(seq, true);
    for (const FrameRef& f : frames) {
      auto* item = new DcmItem();
      seq->append(item);
      if (!ref_uids[f.slice].empty()) {
        DcmItem* derivation = NewItemIn(item, DCM_DerivationImageSequence);
        DcmItem* source = NewItemIn(derivation, DCM_SourceImageSequence);
        source->putAndInsertString(DCM_ReferencedSOPClassUID, ref_class.c_str());
        source->putAndInsertString(DCM_ReferencedSOPInstanceUID, ref_uids[f.slice].c_str());
        PutCode(NewItemIn(source, DCM_PurposeOfReferenceCodeSequence), "121322", "DCM",
                "Source image for image processing operation");
        PutCode(NewItemIn(derivation, DCM_DerivationCodeSequence), "113076", "DCM", "Segmentation");
      }
      auto* index = new DcmUnsignedLong(DcmTag(DCM_DimensionIndexValues));
      const Uint32 iv[2] = {f.segment, static_cast<Uint32>(f.slice + 1)};
      index->putUint32Array(iv, 2);
      NewItemIn(item, DCM_FrameContentSequence)->insert(index, true);
      NewItemIn(item, DCM_PlanePositionSequence)
          ->putAndInsertString(DCM_ImagePositionPatient, positions[f.slice].c_str());
      NewItemIn(item, DCM_SegmentIdentificationSequence)->putAndInsertUint16(DCM_ReferencedSegmentNumber, f.segment);
    }
  }

  // Pixels: frames back to back, 1 bit each, first pixel in the lowest bit;
  // DICOM row y holds j = ny - 1 - y.
  {
    const int64_t length = pixel_bytes + (pixel_bytes & 1);  // even
    auto* pixel_data = new DcmPixelData(DCM_PixelData);
    pixel_data->setVR(EVR_OB);
    Uint8* bits = nullptr;
    if (pixel_data->createUint8Array(static_cast<Uint32>(length), bits).bad() || bits == nullptr) {
      delete pixel_data;
      return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", length, " bytes of SEG pixel data"));
    }
    std::memset(bits, 0, static_cast<size_t>(length));
    std::vector<int64_t> frame_of_segment(num_segments + 1, -1);
    std::vector<std::vector<std::pair<uint16_t, int64_t>>> slice_frames(nz);
    for (int64_t f = 0; f < num_frames; ++f) slice_frames[frames[f].slice].push_back({frames[f].segment, f});
    for (int k = 0; k < nz; ++k) {
      for (const auto& [s, f] : slice_frames[k]) frame_of_segment[s] = f;
      const uint16_t* seg = segment.data() + npix * k;
      for (int y = 0; y < ny; ++y) {
        const uint16_t* row = seg + static_cast<int64_t>(nx) * (ny - 1 - y);
        const int64_t offset = static_cast<int64_t>(nx) * y;
        for (int x = 0; x < nx; ++x) {
          const uint16_t s = row[x];
          if (s == 0) continue;
          const int64_t bit = frame_of_segment[s] * npix + offset + x;
          bits[bit >> 3] |= static_cast<Uint8>(1u << (bit & 7));
        }
      }
      for (const auto& [s, f] : slice_frames[k]) frame_of_segment[s] = -1;
    }
    ds->insert(pixel_data, true);
  }

  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) TESSERA_RETURN_IF_ERROR(internal::MakeDirs(path.substr(0, slash)));
  const OFCondition st = file.saveFile(path.c_str(), EXS_LittleEndianExplicit);
  if (st.bad()) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", st.text()));
  result.files.push_back(path);
  return result;
}

}  // namespace tessera::dicom
