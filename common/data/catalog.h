/* The shared benchmark data sets by name, loaded WITH their standard preprocessing
 * (see ../shared/data/README.md) and with 0-based labels that are the same across the
 * domains of one data set (class index k = k-th label of the data set's documented list).
 *
 *   name                   file (under data_dir)                          preprocessing
 *   office-surf/amazon     office-caltech10-surf/amazon_SURF_L10.csv.gz   L1 rows, then z-score
 *   office-surf/caltech    .../Caltech10_SURF_L10.csv.gz                  (MATLAB zscore(X,1)),
 *   office-surf/webcam     .../webcam_SURF_L10.csv.gz                     per domain; labels 1..10
 *   office-surf/dslr       .../dslr_SURF_L10.csv.gz                       -> 0..9
 *   office-decaf6/webcam   office-caltech10-decaf6/webcam.csv.gz          L1 rows, then z-score
 *   office-decaf6/dslr     .../dslr.csv.gz                                (README 2: the 1NN protocol)
 *   mnist-usps/mnist       mnist-usps/MNIST.csv.gz                        L2 per sample (README 3);
 *   mnist-usps/usps        mnist-usps/USPS.csv.gz                         labels 1..10 -> 0..9
 *   coil20/1, coil20/2     coil20/COIL1.csv.gz, COIL2.csv.gz              L2 per sample; 1..20 -> 0..19
 *   pendigits/train|test   uci-pendigits/pendigits.tra|.tes               none (raw 0..100); label last
 *   fashion-mnist/train|test  /usr/share/datasets/fashion-mnist/ (data_dir ignored)   pixels / 255
 *   parkinsons/motor       uci-parkinsons-telemonitoring/parkinsons_updrs.data   none
 *   parkinsons/total       (same file)
 *   gvhd/pos, gvhd/control gvhd-flow-cytometry/GvHD_pos.csv, GvHD_control.csv   none; unlabelled
 *                          (CD4, CD8b, CD3, CD8 intensities; GMM clustering)
 *
 * Parkinsons is a regression set: X holds age, sex, test_time and the 16 voice measures
 * (19 columns, raw), y_raw the target (motor_UPDRS or total_UPDRS), y/classes are NULL,
 * n_classes 0, and group[i] the subject number (1..42). */
#ifndef FK_CATALOG_H
#define FK_CATALOG_H

#include "common/data/dataset.h"

/* Load the named data set. FK_ENOTFOUND for an unknown name (the message lists the
 * names), FK_EIO when the file is missing (the message names the path and --data_dir). */
FK_CHECKRETURN int fk_catalog_load(fk_dataset *ds, const char *data_dir, const char *name,
                                   fk_err *err);

/* The preprocessing steps name's loader applies to its raw file, as fk_prep_step codes
 * (1 l1, 2 l2, 3 zscore, 4 values / 255), at most cap of them: their count, or -1 for a name
 * that is not in the catalog. (parkinsons' column choice is not a step.) */
int fk_catalog_steps(const char *name, int *codes, int cap);

/* NULL-terminated list of the names fk_catalog_load accepts. */
const char *const *fk_catalog_names(void);

#endif
