// Value types shared by the SOM kernels (BMU search, batch update, quality):
// raw-pointer views of sparse binary documents and of the codebook, the map
// grid, and the (score, index) ordering used for best-matching units.
//
// Conventions:
// - Documents are sparse *binary* vectors over V features, in CSR: document d
//   has the features indices[offsets[d] .. offsets[d+1]), sorted ascending and
//   unique; the value of every listed feature is 1.
// - The codebook has M = width * height nodes; node i sits at grid cell
//   (x, y) = (i % width, i / width) (x fastest, as everywhere in Tessera).
// - Feature-major layout (the default): the weight of feature v at node i is
//   W[v * M + i], so each feature's weights over all nodes are contiguous
//   ("a column"). Node-major (baselines only): W[i * V + v].
// - Exact Euclidean BMU: for binary x, ||x - w_i||^2 = nnz(x) + ||w_i||^2 -
//   2 x.w_i, and nnz(x) is constant per document, so kernels minimise the
//   *score* s_i = ||w_i||^2 - 2 x.w_i. The BMU is the smallest (score, index)
//   pair in lexicographic order (ties go to the lowest index); the second-best
//   unit is the next pair in that order.
// - Every pointer handed to a kernel lives in the memory of the stream's
//   backend: host memory for Backend::kCpu, device memory for Backend::kCuda.
#ifndef TESSERA_KERNELS_SOM_TYPES_H_
#define TESSERA_KERNELS_SOM_TYPES_H_

#include <cmath>
#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define TESSERA_SOM_HD __host__ __device__
#else
#define TESSERA_SOM_HD
#endif

namespace tessera {
namespace som {

// Sparse binary documents (rows) over `cols` features, CSR.
struct CsrView {
  int64_t rows = 0;
  int64_t cols = 0;
  const int64_t* offsets = nullptr;  // rows + 1 entries, offsets[0] == 0
  const int32_t* indices = nullptr;  // offsets[rows] entries

  // Host views only (reads offsets[rows]).
  int64_t nnz() const { return rows == 0 || offsets == nullptr ? 0 : offsets[rows]; }
};

// The same documents by feature (the transpose, CSC of the CSR above):
// feature v occurs in documents doc_ids[offsets[v] .. offsets[v+1]), ascending.
// Used by the batch update to accumulate per-node sums one feature at a time.
struct CscView {
  int64_t features = 0;
  int64_t docs = 0;
  const int64_t* offsets = nullptr;  // features + 1 entries
  const int32_t* doc_ids = nullptr;
};

enum class WeightType { kFloat32, kFloat16 };
enum class CodebookLayout { kFeatureMajor, kNodeMajor };

const char* WeightTypeName(WeightType type);
const char* CodebookLayoutName(CodebookLayout layout);
inline int WeightBytes(WeightType type) { return type == WeightType::kFloat32 ? 4 : 2; }

// A codebook of `nodes` x `features` weights. kFloat16 weights are IEEE
// binary16 bit patterns (uint16_t); arithmetic is always fp32 (or wider).
// sq_norms[i] = ||w_i||^2 of the *stored* weights, kept current by the update.
struct CodebookView {
  int64_t nodes = 0;
  int64_t features = 0;
  WeightType type = WeightType::kFloat32;
  CodebookLayout layout = CodebookLayout::kFeatureMajor;
  void* weights = nullptr;
  float* sq_norms = nullptr;

  TESSERA_SOM_HD int64_t index(int64_t feature, int64_t node) const {
    return layout == CodebookLayout::kFeatureMajor ? feature * nodes + node : node * features + feature;
  }
};

enum class Topology { kPlanar, kToroidal };
const char* TopologyName(Topology topology);

// The map: node i at (i % width, i / width).
struct GridShape {
  int width = 0;
  int height = 0;
  Topology topology = Topology::kPlanar;
  TESSERA_SOM_HD int64_t nodes() const { return static_cast<int64_t>(width) * height; }
};

std::string GridToString(const GridShape& grid);  // "32x32 planar"

// Lexicographic (score, index) order: the BMU rule.
TESSERA_SOM_HD inline bool ScoreLess(float a, int32_t ia, float b, int32_t ib) {
  return a < b || (a == b && ia < ib);
}

// Running best and second-best (score, index) pairs. Empty slots have index
// kNoNode and score +inf.
constexpr int32_t kNoNode = 0x7fffffff;
struct Top2 {
  float s1;
  int32_t i1;
  float s2;
  int32_t i2;

  TESSERA_SOM_HD static Top2 Empty() { return Top2{INFINITY, kNoNode, INFINITY, kNoNode}; }
  TESSERA_SOM_HD void Insert(float s, int32_t i) {
    if (ScoreLess(s, i, s1, i1)) {
      s2 = s1;
      i2 = i1;
      s1 = s;
      i1 = i;
    } else if (ScoreLess(s, i, s2, i2)) {
      s2 = s;
      i2 = i;
    }
  }
  // Top two of the union (a pair never holds the same index twice).
  TESSERA_SOM_HD void Merge(const Top2& o) {
    Insert(o.s1, o.i1);
    Insert(o.s2, o.i2);
  }
};

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_TYPES_H_
