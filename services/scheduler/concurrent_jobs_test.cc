// A registration and a SOM training run as jobs of one scheduler at the same
// time (two worker slots, one device) give exactly the results they give
// alone: no shared mutable kernel state, per-job device-memory accounting.
// On the CPU here; on the GPU (CUDA case) where there is one.
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"
#include "common/testing/gpu_test.h"
#include "gtest/gtest.h"
#include "services/jobs/job_store.h"
#include "services/registration/registration_engine.h"
#include "kernels/registration/pipeline/synthetic.h"
#include "services/scheduler/in_process_worker.h"
#include "services/scheduler/scheduler.h"
#include "services/som/atlas.h"
#include "services/som/corpus.h"
#include "services/som/synthetic.h"
#include "services/som/training_engine.h"
#include "tessera/v1/registration.pb.h"
#include "tessera/v1/som.pb.h"

namespace tessera::scheduler {
namespace {

namespace fs = std::filesystem;

class ConcurrentJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = absl::StrCat(tmp ? tmp : "/tmp", "/concurrent-", getpid(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_ + "/data");
    fs::create_directories(root_ + "/results");
    absl::StatusOr<registration::Phantom> phantom = registration::MakePhantom(40, 4.0);
    ASSERT_TRUE(phantom.ok());
    registration::SyntheticOptions synthetic;
    absl::StatusOr<registration::SyntheticPair> pair =
        registration::MakeSyntheticPair(phantom->image, &phantom->labels, synthetic);
    ASSERT_TRUE(pair.ok());
    ASSERT_TRUE(WriteNifti(phantom->image, root_ + "/data/fixed.nii.gz").ok());
    ASSERT_TRUE(WriteNifti(pair->moving, root_ + "/data/moving.nii.gz").ok());
    som::SyntheticCorpusOptions corpus;
    corpus.docs = 4000;
    corpus.features = 1500;
    corpus.topic_grid_width = corpus.topic_grid_height = 8;
    ASSERT_TRUE(som::WriteCsrBinary(root_ + "/data/corpus.csr", som::GenerateSyntheticCorpus(corpus)).ok());
  }

  std::unique_ptr<Scheduler> MakeScheduler(const std::string& device, int slots) {
    engines_ = std::make_unique<jobs::EngineRegistry>();
    auto registration = registration::RegistrationEngine::Create({root_ + "/data"}, int64_t{1} << 30, device);
    EXPECT_TRUE(registration.ok()) << registration.status();
    EXPECT_TRUE(engines_->Add(*registration).ok());
    som::TrainingEngineOptions som_options;
    som_options.limits.data_roots = {root_ + "/data"};
    som_options.limits.atlas_dir = root_ + "/atlases";
    som_options.limits.default_device = device;
    som_options.limits.max_nodes = 1 << 16;
    som_options.limits.max_corpus_bytes = int64_t{1} << 30;
    auto som = som::NewTrainingEngine(som_options);
    EXPECT_TRUE(som.ok()) << som.status();
    EXPECT_TRUE(engines_->Add(*som).ok());
    auto db = jobs::OpenSqliteDatabase(absl::StrCat(root_, "/jobs-", ++stores_, ".db"));
    EXPECT_TRUE(db.ok());
    auto store = jobs::JobStore::Open(*std::move(db));
    EXPECT_TRUE(store.ok());
    SchedulerOptions options;
    options.heartbeat = absl::Milliseconds(100);
    options.idle_poll = absl::Milliseconds(20);
    std::vector<WorkerSlots> workers = {
        {std::make_shared<InProcessWorker>("scheduler/local", engines_.get(), root_ + "/results", slots), slots}};
    auto s = std::make_unique<Scheduler>(options, *std::move(store), engines_.get(), std::move(workers));
    EXPECT_TRUE(s->Start().ok());
    return s;
  }

  static v1::SubmitJobRequest Registration(const std::string& device) {
    v1::RegisterRequest r;
    r.mutable_fixed()->set_path("fixed.nii.gz");
    r.mutable_moving()->set_path("moving.nii.gz");
    v1::RegistrationOptions* o = r.mutable_options();
    o->set_device(device);
    o->set_metric("lncc");
    o->add_stages("affine");
    o->add_stages("deformable");
    o->add_scales(2);
    o->add_scales(1);
    o->add_affine_iterations(30);
    o->add_deformable_iterations(60);
    v1::SubmitJobRequest submit;
    submit.mutable_spec()->mutable_spec()->PackFrom(r);
    return submit;
  }

  static v1::SubmitJobRequest SomTraining(const std::string& device, const std::string& atlas_id) {
    v1::CreateAtlasRequest r;
    r.set_atlas_id(atlas_id);
    r.mutable_corpus()->set_path("corpus.csr");
    v1::AtlasOptions* o = r.mutable_options();
    o->set_width(16);
    o->set_height(12);
    o->set_epochs(12);
    o->set_radius_decay_epochs(8);
    o->set_convergence_tolerance(0);
    o->set_device(device);
    o->set_holdout_fraction(0.1);
    v1::SubmitJobRequest submit;
    submit.mutable_spec()->mutable_spec()->PackFrom(r);
    return submit;
  }

  static v1::JobInfo WaitForEnd(Scheduler& s, const std::string& id) {
    const absl::Time until = absl::Now() + absl::Minutes(5);
    v1::JobInfo info;
    while (absl::Now() < until) {
      info = s.Get(id).value_or(v1::JobInfo());
      if (info.state() >= v1::JOB_STATE_SUCCEEDED) return info;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "job " << id << " did not end";
    return info;
  }

  struct Outcome {
    v1::RegistrationResult registration;
    NDArray warped;
    v1::AtlasSummary atlas;
    std::vector<float> codebook;
    v1::JobInfo registration_job, som_job;
  };

  Outcome Collect(Scheduler& s, const std::string& registration_id, const std::string& som_id) {
    Outcome out;
    out.registration_job = WaitForEnd(s, registration_id);
    out.som_job = WaitForEnd(s, som_id);
    EXPECT_EQ(out.registration_job.state(), v1::JOB_STATE_SUCCEEDED) << out.registration_job.error_message();
    EXPECT_EQ(out.som_job.state(), v1::JOB_STATE_SUCCEEDED) << out.som_job.error_message();
    absl::StatusOr<v1::JobResult> r = s.GetResult(registration_id);
    EXPECT_TRUE(r.ok() && r->result().UnpackTo(&out.registration));
    for (const v1::ResultFile& f : r->files()) {
      if (f.name() == "warped.nii.gz") {
        absl::StatusOr<Volume> warped = ReadNifti(f.path());
        EXPECT_TRUE(warped.ok());
        if (warped.ok()) out.warped = warped->data;
      }
    }
    absl::StatusOr<v1::JobResult> a = s.GetResult(som_id);
    EXPECT_TRUE(a.ok() && a->result().UnpackTo(&out.atlas));
    absl::StatusOr<som::Atlas> atlas = som::LoadAtlas(out.atlas.directory());
    EXPECT_TRUE(atlas.ok()) << atlas.status();
    if (atlas.ok()) out.codebook = atlas->model.weights_f32;
    return out;
  }

  void RunAloneThenTogether(const std::string& device) {
    Outcome alone, together;
    {
      auto s = MakeScheduler(device, 1);
      const std::string reg = s->Submit(Registration(device))->job_id();
      WaitForEnd(*s, reg);
      const std::string som = s->Submit(SomTraining(device, "alone"))->job_id();
      alone = Collect(*s, reg, som);
    }
    {
      auto s = MakeScheduler(device, 2);
      const std::string reg = s->Submit(Registration(device))->job_id();
      const std::string som = s->Submit(SomTraining(device, "together"))->job_id();
      together = Collect(*s, reg, som);
    }
    // They did overlap.
    EXPECT_LT(together.som_job.started_unix_ms(), together.registration_job.finished_unix_ms());
    EXPECT_LT(together.registration_job.started_unix_ms(), together.som_job.finished_unix_ms());
    // Bit for bit the same.
    EXPECT_EQ(alone.registration.final_loss(), together.registration.final_loss());
    ASSERT_EQ(alone.registration.affine_ras_size(), together.registration.affine_ras_size());
    for (int i = 0; i < alone.registration.affine_ras_size(); ++i) {
      EXPECT_EQ(alone.registration.affine_ras(i), together.registration.affine_ras(i)) << i;
    }
    ASSERT_FALSE(alone.warped.empty());
    ASSERT_EQ(alone.warped.nbytes(), together.warped.nbytes());
    EXPECT_EQ(std::memcmp(alone.warped.raw_data(), together.warped.raw_data(), alone.warped.nbytes()), 0);
    EXPECT_EQ(alone.atlas.training_quality().qe_euclidean(), together.atlas.training_quality().qe_euclidean());
    EXPECT_EQ(alone.atlas.held_out_quality().qe_euclidean(),
              together.atlas.held_out_quality().qe_euclidean());
    ASSERT_FALSE(alone.codebook.empty());
    EXPECT_EQ(alone.codebook, together.codebook);
    // Each job reports its own device peak: the same alone and together.
    EXPECT_EQ(alone.registration_job.peak_device_bytes(), together.registration_job.peak_device_bytes());
    EXPECT_EQ(alone.som_job.peak_device_bytes(), together.som_job.peak_device_bytes());
    if (device == "cuda") {
      EXPECT_GT(together.registration_job.peak_device_bytes(), 0);
      EXPECT_GT(together.som_job.peak_device_bytes(), 0);
    }
  }

  std::string root_;
  std::unique_ptr<jobs::EngineRegistry> engines_;
  int stores_ = 0;
};

TEST_F(ConcurrentJobsTest, CpuJobsRunTogetherAsTheyRunAlone) { RunAloneThenTogether("cpu"); }

TEST_F(ConcurrentJobsTest, CudaJobsShareOneGpuAsTheyRunAlone) {
  TESSERA_SKIP_WITHOUT_GPU();
  RunAloneThenTogether("cuda");
}

}  // namespace
}  // namespace tessera::scheduler
