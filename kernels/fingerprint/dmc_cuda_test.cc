// CUDA DMC kernels 2-4 against the CPU reference: identical outputs (tolerance
// zero: same integers, same float operations, dmc_impl.h). Skipped without a
// GPU. Uses the FVC2002 templates when present, else synthetic ones.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/buffer.h"
#include "common/device.h"
#include "common/testing/gpu_test.h"
#include "kernels/fingerprint/dmc.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

struct Outputs {
  std::vector<int16_t> best;
  std::vector<float> sim, quality;
  std::vector<uint8_t> count, members;
  explicit Outputs(int n)
      : best(n, -7), sim(n, -7), quality(n, -7), count(n, 99), members(static_cast<size_t>(n) * kDmcMaxClusterSize) {}
  DmcKernelResults view() {
    return DmcKernelResults{best.data(), sim.data(), quality.data(), count.data(), members.data()};
  }
};

void ExpectSame(Outputs& a, Outputs& b, int n) {
  int mismatches = 0;
  for (int i = 0; i < n && mismatches < 10; ++i) {
    const bool same = a.best[i] == b.best[i] && std::memcmp(&a.sim[i], &b.sim[i], 4) == 0 &&
                      std::memcmp(&a.quality[i], &b.quality[i], 4) == 0 && a.count[i] == b.count[i];
    bool members_same = true;
    for (int j = 0; same && j < a.count[i]; ++j) {
      members_same = members_same && a.members[static_cast<size_t>(j) * n + i] == b.members[static_cast<size_t>(j) * n + i];
    }
    if (!same || !members_same) {
      ++mismatches;
      ADD_FAILURE() << "cylinder " << i << ": best " << a.best[i] << " / " << b.best[i] << ", sim " << a.sim[i]
                    << " / " << b.sim[i] << ", quality " << a.quality[i] << " / " << b.quality[i] << ", count "
                    << int(a.count[i]) << " / " << int(b.count[i]);
    }
  }
}

TEST(DmcCudaTest, KernelsEqualTheCpuReference) {
  TESSERA_SKIP_WITHOUT_GPU();
  for (int db : {1, 3}) {
    const auto points = testing::TestTemplates(db, 80, 100 + db);
    std::vector<MccTemplate> templates;
    MccGallery gallery;
    for (const auto& p : points) {
      templates.push_back(cpu::BuildMccTemplate(p));
      gallery.Append(templates.back());
    }
    const DmcConstants c = *MakeDmcConstants(DmcParams{});
    auto stream = Stream::Create(Backend::kCuda, 0);
    ASSERT_TRUE(stream.ok()) << stream.status();
    int clusters = 0;
    for (int p : {0, 9, 40, 77}) {
      const DmcLatent latent = *PrepareDmcLatent(templates[p % templates.size()], c);
      // A batch that starts inside the gallery: its own rebased start table.
      const int begin = 3, end = gallery.num_templates();
      const int n = gallery.start[end] - gallery.start[begin];
      Outputs cpu_out(n), gpu_out(n);
      ASSERT_TRUE(RunDmcKernelsOnGallery(Stream::Cpu(), latent, gallery, begin, end, c, cpu_out.view()).ok());
      const absl::Status s = RunDmcKernelsOnGallery(*stream, latent, gallery, begin, end, c, gpu_out.view());
      ASSERT_TRUE(s.ok()) << s;
      ExpectSame(cpu_out, gpu_out, n);
      for (int i = 0; i < n; ++i) clusters += cpu_out.count[i] >= 3;
    }
    EXPECT_GT(clusters, 50) << "the inputs exercise kernel 4";
  }
}

// The pipeline entry point: enqueue on a raw stream into one results block,
// then one copy back.
TEST(DmcCudaTest, EnqueueIntoOneResultsBlock) {
  TESSERA_SKIP_WITHOUT_GPU();
  const auto points = testing::SyntheticTemplates(50, 7);
  MccGallery gallery;
  std::vector<MccTemplate> templates;
  for (const auto& p : points) {
    templates.push_back(cpu::BuildMccTemplate(p));
    gallery.Append(templates.back());
  }
  const DmcConstants c = *MakeDmcConstants(DmcParams{});
  const DmcLatent latent = *PrepareDmcLatent(templates[1], c);
  auto stream = Stream::Create(Backend::kCuda, 0);
  ASSERT_TRUE(stream.ok());
  const int n = gallery.num_cylinders();
  Outputs cpu_out(n);
  ASSERT_TRUE(RunDmcKernelsOnGallery(Stream::Cpu(), latent, gallery, 0, gallery.num_templates(), c,
                                     cpu_out.view()).ok());
  auto d_latent = DmcDeviceLatent::Upload(latent, *stream);
  ASSERT_TRUE(d_latent.ok()) << d_latent.status();
  auto upload = [&](const void* src, size_t bytes) {
    auto b = *Buffer::Allocate(MemoryKind::kDevice, bytes, 0);
    EXPECT_TRUE(CopyBytes(b->data(), MemoryKind::kDevice, src, MemoryKind::kHost, bytes, *stream).ok());
    return b;
  };
  auto start = upload(gallery.start.data(), gallery.start.size() * 4);
  auto bits = upload(gallery.bits.data(), gallery.bits.size() * 8);
  auto mask = upload(gallery.mask.data(), gallery.mask.size() * 8);
  auto x = upload(gallery.x.data(), n * 4);
  auto y = upload(gallery.y.data(), n * 4);
  auto theta = upload(gallery.theta.data(), n * 4);
  auto count = upload(gallery.bit_count.data(), n * 2);
  DmcBatchView batch;
  batch.start = static_cast<const int32_t*>(start->data());
  batch.bits = static_cast<const uint64_t*>(bits->data());
  batch.mask = static_cast<const uint64_t*>(mask->data());
  batch.x = static_cast<const float*>(x->data());
  batch.y = static_cast<const float*>(y->data());
  batch.theta = static_cast<const float*>(theta->data());
  batch.bit_count = static_cast<const uint16_t*>(count->data());
  batch.num_templates = gallery.num_templates();
  batch.num_cylinders = n;
  auto results = *Buffer::Allocate(MemoryKind::kDevice, DmcResultsBytes(n), 0);
  ASSERT_TRUE(EnqueueDmcKernels(stream->native(), d_latent->view(), batch, gallery.max_template_size(), c,
                                DmcResultsAt(results->data(), n))
                  .ok());
  std::vector<uint8_t> host_block(DmcResultsBytes(n) + 16);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(host_block.data()) + 15) & ~uintptr_t{15});
  ASSERT_TRUE(CopyBytes(aligned, MemoryKind::kHost, results->data(), MemoryKind::kDevice, DmcResultsBytes(n), *stream)
                  .ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  const DmcKernelResults r = DmcResultsAt(aligned, n);
  Outputs gpu_out(n);
  std::memcpy(gpu_out.best.data(), r.best_latent, n * 2);
  std::memcpy(gpu_out.sim.data(), r.similarity, n * 4);
  std::memcpy(gpu_out.quality.data(), r.quality, n * 4);
  std::memcpy(gpu_out.count.data(), r.cluster_count, n);
  std::memcpy(gpu_out.members.data(), r.cluster_members, static_cast<size_t>(n) * kDmcMaxClusterSize);
  ExpectSame(cpu_out, gpu_out, n);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
