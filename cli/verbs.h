// The verbs of the `tessera` command. Each takes the arguments after the verb
// and returns a process exit code.
#ifndef TESSERA_CLI_VERBS_H_
#define TESSERA_CLI_VERBS_H_

namespace tessera::cli {

int RunServe(int argc, char** argv);     // host all services
int RunDemo(int argc, char** argv);      // end-to-end tour over real gRPC
int RunDescribe(int argc, char** argv);  // local NIfTI / DICOM series summary
int RunConvert(int argc, char** argv);   // DICOM series -> NIfTI
int RunDevices(int argc, char** argv);   // backends and GPUs
int RunRegister(int argc, char** argv);  // local image registration
int RunApplyTransforms(int argc, char** argv);  // antsApplyTransforms (issue 34)
int RunSynth(int argc, char** argv);     // synthetic registration problem
int RunSom(int argc, char** argv);       // SOM atlases: train, project, render, labels
int RunFp(int argc, char** argv);        // fingerprint gallery: enroll, search, delete, list
int RunFpNist(int argc, char** argv);    // `fp nist show`: ANSI/NIST-ITL transactions as JSON
int RunFpChart(int argc, char** argv);   // `fp chart`: a match chart (paired minutiae, alignment) as PNG + JSON
int RunJob(int argc, char** argv);       // scheduler client: submit, watch, cancel, result, list, workers
int RunPhantom(int argc, char** argv);  // reconstruction test data: analytic sinograms, geometry JSON
int RunAudit(int argc, char** argv);     // audit trail: verify the hash chain, show records
int RunRecon(int argc, char** argv);     // CT / PET reconstruction on this machine
int RunHealth(int argc, char** argv);    // one gRPC health check (container probes)

}  // namespace tessera::cli

#endif  // TESSERA_CLI_VERBS_H_
