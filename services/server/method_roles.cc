// The one table of required roles: full gRPC method name -> least role that may call it.
// A hosted method missing here is denied (fail closed); auth_test checks that every
// method of every hosted service is listed.
#include <map>
#include <string>

#include "services/server/auth.h"

namespace tessera {

const std::map<std::string, Role>& MethodRoleTable() {
  static const auto* table = new std::map<std::string, Role>{
      // VolumeService
      {"/tessera.v1.VolumeService/DescribeFile", Role::kReader},
      {"/tessera.v1.VolumeService/DescribeStream", Role::kReader},
      // RegistrationService
      {"/tessera.v1.RegistrationService/UploadVolume", Role::kEnroller},
      {"/tessera.v1.RegistrationService/Register", Role::kEnroller},
      {"/tessera.v1.RegistrationService/WatchJob", Role::kReader},
      {"/tessera.v1.RegistrationService/GetJob", Role::kReader},
      {"/tessera.v1.RegistrationService/CancelJob", Role::kEnroller},
      {"/tessera.v1.RegistrationService/GetResult", Role::kReader},
      {"/tessera.v1.RegistrationService/DownloadResult", Role::kReader},
      // ReconstructionService
      {"/tessera.v1.ReconstructionService/UploadFile", Role::kEnroller},
      {"/tessera.v1.ReconstructionService/Reconstruct", Role::kEnroller},
      {"/tessera.v1.ReconstructionService/WatchJob", Role::kReader},
      {"/tessera.v1.ReconstructionService/GetJob", Role::kReader},
      {"/tessera.v1.ReconstructionService/CancelJob", Role::kEnroller},
      {"/tessera.v1.ReconstructionService/GetResult", Role::kReader},
      {"/tessera.v1.ReconstructionService/DownloadResult", Role::kReader},
      // FingerprintService
      {"/tessera.v1.FingerprintService/Enroll", Role::kEnroller},
      {"/tessera.v1.FingerprintService/EnrollStream", Role::kEnroller},
      {"/tessera.v1.FingerprintService/Delete", Role::kAdmin},
      {"/tessera.v1.FingerprintService/List", Role::kReader},
      {"/tessera.v1.FingerprintService/Search", Role::kReader},
      {"/tessera.v1.FingerprintService/SearchBatch", Role::kReader},
      {"/tessera.v1.FingerprintService/Verify", Role::kReader},
      {"/tessera.v1.FingerprintService/CreateGallery", Role::kAdmin},
      {"/tessera.v1.FingerprintService/ListGalleries", Role::kAdmin},
      // SomAtlasService
      {"/tessera.v1.SomAtlasService/UploadCorpus", Role::kEnroller},
      {"/tessera.v1.SomAtlasService/CreateAtlas", Role::kEnroller},
      {"/tessera.v1.SomAtlasService/WatchJob", Role::kReader},
      {"/tessera.v1.SomAtlasService/GetJob", Role::kReader},
      {"/tessera.v1.SomAtlasService/CancelJob", Role::kEnroller},
      {"/tessera.v1.SomAtlasService/ListAtlases", Role::kReader},
      {"/tessera.v1.SomAtlasService/GetAtlas", Role::kReader},
      {"/tessera.v1.SomAtlasService/Project", Role::kReader},
      {"/tessera.v1.SomAtlasService/GetCell", Role::kReader},
      {"/tessera.v1.SomAtlasService/GetCodebook", Role::kReader},
      {"/tessera.v1.SomAtlasService/DeleteAtlas", Role::kAdmin},
      // SchedulerService
      {"/tessera.v1.SchedulerService/Submit", Role::kEnroller},
      {"/tessera.v1.SchedulerService/Watch", Role::kReader},
      {"/tessera.v1.SchedulerService/Cancel", Role::kEnroller},
      {"/tessera.v1.SchedulerService/Get", Role::kReader},
      {"/tessera.v1.SchedulerService/GetResult", Role::kReader},
      {"/tessera.v1.SchedulerService/List", Role::kReader},
      {"/tessera.v1.SchedulerService/ListWorkers", Role::kReader},
      // WorkerService (a scheduler calling its workers): running work is an admin right.
      {"/tessera.v1.WorkerService/Execute", Role::kAdmin},
      {"/tessera.v1.WorkerService/Describe", Role::kReader},
      // RendezvousService (ranks of one registration agree on an NCCL id): as submitting one.
      {"/tessera.v1.RendezvousService/Join", Role::kEnroller},
  };
  return *table;
}

}  // namespace tessera
