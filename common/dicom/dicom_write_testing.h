// Test helpers for the DICOM writers' tests (dicom_writer_test,
// dicom_seg_test, deidentify_test).
#ifndef TESSERA_COMMON_DICOM_DICOM_WRITE_TESTING_H_
#define TESSERA_COMMON_DICOM_DICOM_WRITE_TESTING_H_

#include <array>
#include <string>

#include "common/volume.h"

namespace tessera::dicom::testing {

// A fresh empty directory under $TEST_TMPDIR.
std::string TmpDir(const std::string& name);

// Whether `tool` is on PATH.
bool Have(const char* tool);

// dciodvfy's report on one file ("" when dciodvfy is not on PATH: printed).
// Its exit status is not its verdict: the "Error" lines are.
std::string Dciodvfy(const std::string& file);

// Largest difference of the 3x4 index-to-world matrices (mm).
double AffineDiff(const Geometry& a, const Geometry& b);

// The same image with k reversed (how a positive-determinant volume reads
// back from DICOM: dicom_writer.h, "Handedness").
Volume ReverseK(const Volume& v);

double Det(const Geometry& g);

// An oblique direction: a rotation by `a` about z times one by `b` about x
// (radians); with `negative`, its first column negated (an index frame of
// negative determinant, what DICOM reads as).
std::array<double, 9> ObliqueDirection(double a, double b, bool negative);

// Every byte of a file.
std::string ReadBytes(const std::string& path);

}  // namespace tessera::dicom::testing

#endif  // TESSERA_COMMON_DICOM_DICOM_WRITE_TESTING_H_
