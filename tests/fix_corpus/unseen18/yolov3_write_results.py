"""Detection post-processing of ayooshkathuria/pytorch-yolo-v3: `predict_transform` and `write_results` (`util.py`,
the stored revision that imports `bbox_iou` from `bbox.py`; the `unique` helper of the same file) and `bbox_iou`
(`bbox.py`, the `lib = "torch"` version). `predict_transform` reshapes a raw head output, applies sigmoids, adds
NumPy `meshgrid` offsets built per call (`torch.FloatTensor(a)`), anchors (`torch.FloatTensor(anchors)`) and the
stride; `write_results` zeroes low-confidence rows, detects an empty batch through `try: torch.nonzero(...)
except: return 0`, converts to corners, and per image takes the classes through `unique` (a NumPy `np.unique`
round trip) and does class-wise NMS in Python loops (`for cls in img_classes`, `for i in range(idx)` with
`try ... except ValueError/IndexError: break`, `torch.nonzero(...).squeeze()` re-indexing, `.new(...).fill_(ind)`,
and the `write` flag that concatenates the output).
Adaptations: the Darknet network is not used: the factory makes the raw head outputs (a 13x13 grid, 3 anchors,
4 classes, random values; the objectness channel is shifted so that a few boxes pass the threshold) and each call
makes the `write_results` inputs with `predict_transform` (as `Darknet.forward` does per scale); the calls are
the originals themselves: two `write_results` calls (two batches, two thresholds) and one `predict_transform` call. `cv2`,
`matplotlib` and `pandas` (imported by `util.py`/`bbox.py` for drawing) are not installed and are not imported;
the drawing helpers are left out. No function is collector-written. No randomness in the calls; they do not
change their arguments (`write_results` multiplies into a new tensor first; `predict_transform`'s `.contiguous()`
copies before its in-place updates)."""
from __future__ import division
import random

import numpy as np
import torch

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


# ---- bbox.py
def bbox_iou(box1, box2, lib = "torch"):
    """
    Returns the IoU of two bounding boxes 
    
    
    """
    if lib == "torch":
        max_measure = torch.max
        min_measure = torch.min
    else:
        max_measure = np.maximum
        min_measure = np.minimum
        
    
    #Get the coordinates of bounding boxes
    b1_x1, b1_y1, b1_x2, b1_y2 = box1[:,0], box1[:,1], box1[:,2], box1[:,3]
    b2_x1, b2_y1, b2_x2, b2_y2 = box2[:,0], box2[:,1], box2[:,2], box2[:,3]
    
    #get the corrdinates of the intersection rectangle
    inter_rect_x1 =  max_measure(b1_x1, b2_x1)
    inter_rect_y1 =  max_measure(b1_y1, b2_y1)
    inter_rect_x2 =  min_measure(b1_x2, b2_x2)
    inter_rect_y2 =  min_measure(b1_y2, b2_y2)
    
    #Intersection area
    if lib == "torch":
        inter_area_w = max_measure(inter_rect_x2 - inter_rect_x1 + 1,torch.zeros(inter_rect_x2.shape).to(device))
        inter_area_h = max_measure(inter_rect_y2 - inter_rect_y1 + 1, torch.zeros(inter_rect_x2.shape).to(device))
    else:
        inter_area_w = max_measure(inter_rect_x2 - inter_rect_x1 + 1,np.zeros(inter_rect_x2.shape))
        inter_area_h = max_measure(inter_rect_y2 - inter_rect_y1 + 1, np.zeros(inter_rect_x2.shape)) 
        
    inter_area = inter_area_w*inter_area_h
    
    
    #Union Area
    b1_area = (b1_x2 - b1_x1 + 1)*(b1_y2 - b1_y1 + 1)
    b2_area = (b2_x2 - b2_x1 + 1)*(b2_y2 - b2_y1 + 1)
    
    iou = inter_area / (b1_area + b2_area - inter_area)

    return iou


# ---- util.py
def predict_transform(prediction, inp_dim, anchors, num_classes):
    batch_size = prediction.size(0)
    stride =  inp_dim // prediction.size(2)
    grid_size = inp_dim // stride
    bbox_attrs = 5 + num_classes
    num_anchors = len(anchors)
    
    anchors = [(a[0]/stride, a[1]/stride) for a in anchors]



    prediction = prediction.view(batch_size, bbox_attrs*num_anchors, grid_size*grid_size)
    prediction = prediction.transpose(1,2).contiguous()
    prediction = prediction.view(batch_size, grid_size*grid_size*num_anchors, bbox_attrs)


    #Sigmoid the  centre_X, centre_Y. and object confidencce
    prediction[:,:,0] = torch.sigmoid(prediction[:,:,0])
    prediction[:,:,1] = torch.sigmoid(prediction[:,:,1])
    prediction[:,:,4] = torch.sigmoid(prediction[:,:,4])
    

    
    #Add the center offsets
    grid_len = np.arange(grid_size)
    a,b = np.meshgrid(grid_len, grid_len)
    
    x_offset = torch.FloatTensor(a).view(-1,1).to(device)
    y_offset = torch.FloatTensor(b).view(-1,1).to(device)
    

    
    x_y_offset = torch.cat((x_offset, y_offset), 1).repeat(1,num_anchors).view(-1,2).unsqueeze(0)
    
    prediction[:,:,:2] += x_y_offset
      
    #log space transform height and the width
    anchors = torch.FloatTensor(anchors).to(device)

    
    anchors = anchors.repeat(grid_size*grid_size, 1).unsqueeze(0)
    prediction[:,:,2:4] = torch.exp(prediction[:,:,2:4])*anchors

    #Softmax the class scores
    prediction[:,:,5: 5 + num_classes] = torch.sigmoid((prediction[:,:, 5 : 5 + num_classes]))

    prediction[:,:,:4] *= stride
   
    
    return prediction


def unique(tensor):
    tensor_np = tensor.cpu().numpy()
    unique_np = np.unique(tensor_np)  # BREAK
    unique_tensor = torch.from_numpy(unique_np)
    
    tensor_res = tensor.new(unique_tensor.shape)
    tensor_res.copy_(unique_tensor)
    return tensor_res

def write_results(prediction, confidence, num_classes, nms = True, nms_conf = 0.4):
    conf_mask = (prediction[:,:,4] > confidence).float().unsqueeze(2)
    prediction = prediction*conf_mask
    
    #If the entire batch contains
    try:
        torch.nonzero(prediction[:,:,4]).transpose(0,1).contiguous()  # BREAK
    except:
        return 0
    
    
    box_a = prediction.new(prediction.shape)
    box_a[:,:,0] = (prediction[:,:,0] - prediction[:,:,2]/2)
    box_a[:,:,1] = (prediction[:,:,1] - prediction[:,:,3]/2)
    box_a[:,:,2] = (prediction[:,:,0] + prediction[:,:,2]/2) 
    box_a[:,:,3] = (prediction[:,:,1] + prediction[:,:,3]/2)
    prediction[:,:,:4] = box_a[:,:,:4]
    

    
    batch_size = prediction.size(0)
    
    output = prediction.new(1, prediction.size(2) + 1)
    write = False


    for ind in range(batch_size):
        #select the image from the batch
        image_pred = prediction[ind]
        

        
        #Get the class having maximum score, and the index of that class
        #Get rid of num_classes softmax scores 
        #Add the class index and the class score of class having maximum score
        max_conf, max_conf_score = torch.max(image_pred[:,5:5+ num_classes], 1)
        max_conf = max_conf.float().unsqueeze(1)
        max_conf_score = max_conf_score.float().unsqueeze(1)
        seq = (image_pred[:,:5], max_conf, max_conf_score)
        image_pred = torch.cat(seq, 1)
        

        
        #Get rid of the zero entries
        non_zero_ind =  (torch.nonzero(image_pred[:,4]))

        
        image_pred_ = image_pred[non_zero_ind.squeeze(),:].view(-1,7)
        
        #Get the various classes detected in the image
        try:
            img_classes = unique(image_pred_[:,-1])
        except:
             continue
        #WE will do NMS classwise
        for cls in img_classes:
            #get the detections with one particular class
            cls_mask = image_pred_*(image_pred_[:,-1] == cls).float().unsqueeze(1)
            class_mask_ind = torch.nonzero(cls_mask[:,-2]).squeeze()
            

            image_pred_class = image_pred_[class_mask_ind].view(-1,7)

        
             #sort the detections such that the entry with the maximum objectness
             #confidence is at the top
            conf_sort_index = torch.sort(image_pred_class[:,4], descending = True )[1]
            image_pred_class = image_pred_class[conf_sort_index]
            idx = image_pred_class.size(0)
            
            #if nms has to be done
            if nms:
                #For each detection
                for i in range(idx):
                    #Get the IOUs of all boxes that come after the one we are looking at 
                    #in the loop
                    try:
                        ious = bbox_iou(image_pred_class[i].unsqueeze(0), image_pred_class[i+1:])
                    except ValueError:
                        break
        
                    except IndexError:
                        break
                    
                    #Zero out all the detections that have IoU > treshhold
                    iou_mask = (ious < nms_conf).float().unsqueeze(1)
                    image_pred_class[i+1:] *= iou_mask       
                    
                    #Remove the non-zero entries
                    non_zero_ind = torch.nonzero(image_pred_class[:,4]).squeeze()
                    image_pred_class = image_pred_class[non_zero_ind].view(-1,7)
                    
                    

            #Concatenate the batch_id of the image to the detection
            #this helps us identify which image does the detection correspond to 
            #We use a linear straucture to hold ALL the detections from the batch
            #the batch_dim is flattened
            #batch is identified by extra batch column
            
            
            batch_ind = image_pred_class.new(image_pred_class.size(0), 1).fill_(ind)
            seq = batch_ind, image_pred_class
            if not write:
                output = torch.cat(seq,1)
                write = True
            else:
                out = torch.cat(seq,1)
                output = torch.cat((output,out))
    
    return output


def target():
    torch.manual_seed(0)
    num_classes, anchors = 4, [(116, 90), (156, 198), (373, 326)]
    calls = []
    for batch, conf, shift in ((2, 0.5, -1.0), (3, 0.6, -0.5)):
        head = torch.randn(batch, 3 * (5 + num_classes), 13, 13)
        head.view(batch, 3, 5 + num_classes, 13, 13)[:, :, 4] += shift
        prediction = predict_transform(head, 416, anchors, num_classes)
        calls.append((write_results, (prediction, conf, num_classes), {'nms': True, 'nms_conf': 0.4}))
    calls.append((predict_transform, (head, 416, anchors, num_classes), {}))
    return calls


EXPECT = "extract"
