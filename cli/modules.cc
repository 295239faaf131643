// The module list: a new service is one line here (docs/ADDING_A_SERVICE.md).
#include "cli/demo_context.h"
#include "cli/module.h"
#include "cli/verbs.h"
#include "services/fingerprint/fingerprint_module.h"
#include "services/reconstruction/reconstruction_module.h"
#include "services/registration/registration_module.h"
#include "services/som/som_module.h"
#include "services/volume/volume_module.h"

namespace tessera::cli {

const std::vector<ModuleEntry>& Modules() {
  static const auto* modules = new std::vector<ModuleEntry>{
      {"volume", [](const ModuleOptions& o) { return NewVolumeModule(o.server); },
       {{"describe", RunDescribe, "summarize a NIfTI volume or a DICOM series: geometry, orientation, identity"},
        {"convert", RunConvert, "convert a DICOM series (directory, zip or files) to NIfTI"}},
       DemoVolumeStep},
      {"registration", [](const ModuleOptions& o) { return NewRegistrationModule(o.server); },
       {{"register", RunRegister, "register a moving volume to a fixed one; ANTs-style outputs + JSON"},
        {"apply-transforms", RunApplyTransforms,
         "resample an image or label map (or map points) through saved transforms, as antsApplyTransforms"},
        {"synth", RunSynth, "make a registration problem with a known answer from a real volume"}},
       DemoRegistrationStep},
      {"som", [](const ModuleOptions& o) { return NewSomModule(o.server); },
       {{"som", RunSom, "SOM atlases: train on a sparse corpus, project documents, render PNGs, label cells"}},
       DemoSomStep},
      {"fingerprint", [](const ModuleOptions& o) { return NewFingerprintModule(o.server, o.fingerprint); },
       {{"fp", RunFp, "fingerprint gallery in a directory: enroll, search (JSON), delete, list"}},
       DemoFingerprintStep},
      {"reconstruction", [](const ModuleOptions& o) { return NewReconstructionModule(o.server); },
       {{"phantom", RunPhantom, "reconstruction test data: exact CT/PET sinograms of phantoms, geometry JSON"},
        {"recon", RunRecon, "CT (fbp, fdk, sart, os-sart, cgls) and PET (mlem, osem) reconstruction to NIfTI"}},
       DemoReconstructionStep},
  };
  return *modules;
}

}  // namespace tessera::cli
